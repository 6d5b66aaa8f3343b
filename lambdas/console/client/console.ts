/// <reference lib="dom" />
/**
 * The console's one script (bundled by esbuild with `@simplewebauthn/browser` and uPlot): it
 * sends the page's forms and buttons to the session API as JSON with the session's CSRF token,
 * shows a new key or invitation link once with a copy button, runs passkey sign-in and joining,
 * and draws the usage charts. Everything else is server-rendered.
 */
import { startAuthentication, startRegistration } from '@simplewebauthn/browser';
import uPlot from 'uplot';
import { minorFromMajor } from './money';

interface Envelope {
  readonly error?: { readonly message?: string };
}

function csrf(): string {
  return document.querySelector<HTMLMetaElement>('meta[name="sluice-csrf"]')?.content ?? '';
}

function flash(message: string): void {
  const el = document.querySelector<HTMLElement>('.flash');
  if (el === null) return;
  el.textContent = message;
  el.hidden = false;
}

async function send(method: string, path: string, body: unknown): Promise<Record<string, unknown>> {
  const res = await fetch(path, {
    method,
    headers: { 'content-type': 'application/json', 'x-sluice-csrf': csrf() },
    body: JSON.stringify(body ?? {}),
    credentials: 'same-origin',
  });
  const parsed = (await res.json().catch(() => ({}))) as Record<string, unknown> & Envelope;
  if (!res.ok) throw new Error(parsed.error?.message ?? `The console answered ${res.status}.`);
  return parsed;
}

/** Shows a secret (a new key, an invitation link) once, with a copy button; the page reloads after. */
function showSecret(note: string, value: string): void {
  const panel = document.querySelector<HTMLElement>('.secret');
  if (panel === null) return;
  (panel.querySelector('.secret-note') as HTMLElement).textContent = note;
  (panel.querySelector('.secret-value') as HTMLElement).textContent = value;
  panel.hidden = false;
  const copy = panel.querySelector<HTMLButtonElement>('.copy');
  if (copy !== null) {
    copy.onclick = () => {
      void navigator.clipboard.writeText(value).then(
        () => (copy.textContent = 'Copied'),
        () => (copy.textContent = 'Select and copy it'),
      );
    };
  }
  const done = panel.querySelector<HTMLButtonElement>('.done');
  if (done !== null) done.onclick = () => location.reload();
}

function afterChange(out: Record<string, unknown>, then: string | undefined): void {
  if (typeof out['rawKey'] === 'string') {
    showSecret('Your new key. Copy it now: it is shown this once and Sluice cannot show it again.', out['rawKey']);
    return;
  }
  if (typeof out['link'] === 'string') {
    showSecret('The invitation link. Send it to the person you invited: it is shown this once.', `${location.origin}${out['link']}`);
    return;
  }
  if (then !== undefined) location.assign(then);
  else location.reload();
}

/** Reads a form into a body, a path and a query, following each input's `data-kind`. */
function readForm(form: HTMLFormElement, pathTemplate: string): { path: string; body: Record<string, unknown> } {
  const body: Record<string, unknown> = {};
  const query = new URLSearchParams();
  let path = pathTemplate;
  for (const el of Array.from(form.querySelectorAll<HTMLInputElement | HTMLTextAreaElement>('input[name], textarea[name]'))) {
    const kind = el.dataset['kind'];
    const value = el.value.trim();
    if (kind === 'query') {
      if ((el as HTMLInputElement).checked) query.set(el.name, 'true');
    } else if (kind === 'path') {
      path = path.replace(`{${el.name}}`, encodeURIComponent(value));
    } else if (kind === 'money') {
      body[el.name] = value === '' ? null : minorFromMajor(value);
    } else if (kind === 'lines') {
      body[el.name] = value.split('\n').map((l) => l.trim()).filter((l) => l !== '');
    } else if (kind === 'date') {
      if (value !== '') body[el.name] = new Date(`${value}T23:59:59Z`).toISOString();
    } else if (value !== '') {
      body[el.name] = value;
    }
  }
  const q = query.toString();
  return { path: q === '' ? path : `${path}?${q}`, body };
}

function wireApi(): void {
  document.addEventListener('submit', (ev) => {
    const form = ev.target as HTMLFormElement;
    const api = form.dataset['api'];
    if (api === undefined) return;
    ev.preventDefault();
    const [method, template] = api.split(' ') as [string, string];
    if (form.dataset['confirm'] !== undefined && !confirm(form.dataset['confirm'])) return;
    let call: { path: string; body: Record<string, unknown> };
    try {
      call = readForm(form, template);
    } catch (err) {
      flash((err as Error).message);
      return;
    }
    send(method, call.path, call.body).then((out) => afterChange(out, undefined), (err: Error) => flash(err.message));
  });
  document.addEventListener('click', (ev) => {
    const button = (ev.target as HTMLElement).closest<HTMLButtonElement>('button[data-api]');
    if (button === null || button.form !== null) return;
    const [method, path] = (button.dataset['api'] ?? '').split(' ') as [string, string];
    if (button.dataset['confirm'] !== undefined && !confirm(button.dataset['confirm'])) return;
    const body = button.dataset['body'] === undefined ? {} : (JSON.parse(button.dataset['body']) as unknown);
    send(method, path, body).then((out) => afterChange(out, button.dataset['then']), (err: Error) => flash(err.message));
  });
}

function wireSignIn(): void {
  document.getElementById('signin')?.addEventListener('click', () => {
    void (async () => {
      const optionsJSON = (await send('POST', '/console/api/signin/options', {})) as unknown as Parameters<typeof startAuthentication>[0]['optionsJSON'];
      const response = await startAuthentication({ optionsJSON });
      const out = await send('POST', '/console/api/signin/verify', { response });
      location.assign(String(out['next'] ?? '/console/'));
    })().catch((err: Error) => flash(err.message));
  });
  document.getElementById('join')?.addEventListener('click', () => {
    void (async () => {
      const params = new URLSearchParams(location.hash.slice(1));
      const invite = { workspaceId: params.get('ws') ?? '', invitation: params.get('invitation') ?? '' };
      const optionsJSON = (await send('POST', '/console/api/join/options', invite)) as unknown as Parameters<typeof startRegistration>[0]['optionsJSON'];
      const response = await startRegistration({ optionsJSON });
      const out = await send('POST', '/console/api/join/verify', { ...invite, response });
      // The invitation is used: drop it from the address bar and history.
      history.replaceState(null, '', '/console/join');
      location.assign(String(out['next'] ?? '/console/'));
    })().catch((err: Error) => flash(err.message));
  });
}

interface Series {
  readonly x: number[];
  readonly series: { label: string; micros: number[] }[];
}

const PALETTE = ['#2563eb', '#dc2626', '#16a34a', '#9333ea', '#ea580c', '#0891b2', '#4b5563'];

/** Micro-units as major units for an axis label (display only; amounts stay integers). */
function axisMoney(micros: number): string {
  return (micros / 100_000_000).toFixed(micros !== 0 && Math.abs(micros) < 1_000_000 ? 6 : 2);
}

function wireCharts(): void {
  const data = document.getElementById('usage-charts');
  if (data === null) return;
  const charts = JSON.parse(data.textContent ?? '{}') as Record<string, Series>;
  for (const el of Array.from(document.querySelectorAll<HTMLElement>('.chart'))) {
    const s = charts[el.dataset['series'] ?? ''];
    if (s === undefined) continue;
    const opts: uPlot.Options = {
      width: Math.max(320, el.clientWidth || 640),
      height: 220,
      series: [{}, ...s.series.map((x, i) => ({ label: x.label, stroke: PALETTE[i % PALETTE.length], width: 2, value: (_u: uPlot, v: number | null) => (v === null ? '—' : axisMoney(v)) }))],
      axes: [{}, { values: (_u: uPlot, vals: number[]) => vals.map(axisMoney), size: 90 }],
      scales: { y: { range: (_u: uPlot, _min: number, max: number) => [0, Math.max(max, 1)] } },
    };
    el.dataset['drawn'] = String(s.series.length);
    new uPlot(opts, [s.x, ...s.series.map((x) => x.micros)], el);
  }
}

function wireLookup(): void {
  const form = document.querySelector<HTMLFormElement>('form.lookup');
  if (form === null) return;
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const id = (form.querySelector('input[name="requestId"]') as HTMLInputElement).value.trim();
    const out = document.querySelector<HTMLElement>('.lookup-result');
    void fetch(`/console/api/requests/${encodeURIComponent(id)}`, { credentials: 'same-origin' })
      .then(async (res) => {
        const body = (await res.json()) as Record<string, unknown> & Envelope;
        if (out === null) return;
        out.hidden = false;
        if (!res.ok) {
          out.textContent = body.error?.message ?? `not found (${res.status})`;
          return;
        }
        const shown = ['requestId', 'requestedModel', 'servedBy', 'outcome', 'status', 'inputTokens', 'outputTokens', 'chargeMicros', 'durationMs'];
        out.textContent = shown.map((k) => `${k}: ${String(body[k] ?? '—')}`).join('\n');
      })
      .catch((err: Error) => flash(err.message));
  });
}

document.addEventListener('DOMContentLoaded', () => {
  wireApi();
  wireSignIn();
  wireCharts();
  wireLookup();
});
