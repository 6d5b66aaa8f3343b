/// <reference lib="dom" />
/**
 * The console's one script (bundled by esbuild with `@simplewebauthn/browser`, uPlot and the
 * core's money formatting): it sends the page's forms and buttons to the session API as JSON with
 * the session's CSRF token, shows a new key or invitation link once with a copy button (and the
 * page's tables, read again, with its row), swaps an amount with its exact figure on a click, runs
 * passkey sign-in and joining, and draws the usage charts. Everything else is server-rendered.
 */
import { startAuthentication, startRegistration } from '@simplewebauthn/browser';
import uPlot from 'uplot';
import { axisPlaces, formatMoney, formatMoneyRounded, majorAmount } from '../../core/money-format';
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

/**
 * Reads the page again and swaps in its fresh tables (and whatever else is marked
 * `data-refresh`), so a change that shows a secret also shows its row while the secret is on
 * screen. A key list is read from an index that may lag a fresh key by a moment: with
 * `expectText`, it reads again a few times until the text is there.
 */
async function refreshParts(expectText?: string): Promise<void> {
  for (const wait of [0, 300, 1000, 2000]) {
    if (wait > 0) await new Promise((done) => setTimeout(done, wait));
    const res = await fetch(location.pathname, { credentials: 'same-origin' });
    if (!res.ok) return;
    const fresh = new DOMParser().parseFromString(await res.text(), 'text/html');
    for (const el of Array.from(document.querySelectorAll<HTMLElement>('[data-refresh][data-testid]'))) {
      const next = fresh.querySelector(`[data-refresh][data-testid="${CSS.escape(el.dataset['testid'] ?? '')}"]`);
      if (next !== null) el.replaceWith(document.importNode(next, true));
    }
    if (expectText === undefined || (document.querySelector('main')?.textContent ?? '').includes(expectText)) return;
  }
}

/** Shows a secret (a new key, an invitation link) once, with a copy button; "Done" clears it. */
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
  if (done !== null) {
    done.onclick = () => {
      // The secret leaves the page with the panel; the tables were refreshed when it was shown.
      (panel.querySelector('.secret-value') as HTMLElement).textContent = '';
      if (copy !== null) copy.textContent = 'Copy';
      panel.hidden = true;
    };
  }
}

function afterChange(out: Record<string, unknown>, then: string | undefined, form?: HTMLFormElement): void {
  if (typeof out['rawKey'] === 'string') {
    showSecret('Your new key. Copy it now: it is shown this once and Sluice cannot show it again.', out['rawKey']);
    form?.reset();
    void refreshParts(typeof out['visible'] === 'string' ? out['visible'] : undefined).catch((err: Error) => flash(err.message));
    return;
  }
  if (typeof out['link'] === 'string') {
    const invitation = out['invitation'] as { kind?: string; email?: string } | undefined;
    showSecret(
      invitation?.kind === 'passkey'
        ? `The passkey link for ${invitation.email ?? 'the member'}. Send it to them: opening it adds a passkey to their membership. It is shown this once.`
        : 'The invitation link. Send it to the person you invited: it is shown this once.',
      `${location.origin}${out['link']}`,
    );
    form?.reset();
    void refreshParts(invitation?.email).catch((err: Error) => flash(err.message));
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
  for (const el of Array.from(form.querySelectorAll<HTMLInputElement | HTMLTextAreaElement | HTMLSelectElement>('input[name], textarea[name], select[name]'))) {
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

/** An amount shown in people's precision swaps with its exact figure, and back (the title says it on hover). */
function toggleExact(el: HTMLElement): void {
  const exact = el.dataset['exact'] ?? '';
  const shown = el.dataset['shown'] ?? '';
  el.textContent = el.textContent === exact ? shown : exact;
}

function wireApi(): void {
  document.addEventListener('keydown', (ev) => {
    const amount = (ev.target as HTMLElement).closest?.<HTMLElement>('.money[data-exact]');
    if (amount !== null && amount !== undefined && (ev.key === 'Enter' || ev.key === ' ')) {
      ev.preventDefault();
      toggleExact(amount);
    }
  });
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
    send(method, call.path, call.body).then((out) => afterChange(out, undefined, form), (err: Error) => flash(err.message));
  });
  document.addEventListener('click', (ev) => {
    const amount = (ev.target as HTMLElement).closest<HTMLElement>('.money[data-exact]');
    if (amount !== null) {
      toggleExact(amount);
      return;
    }
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

/** Axis steps in micro-units, 1-2-5 from one micro-unit up: every tick is a whole amount. */
const MONEY_STEPS: number[] = [];
for (let step = 1; step <= 1e15; step *= 10) MONEY_STEPS.push(step, step * 2, step * 5);

/** The y axis of a chart that has only zeros: up to one cent, so its ticks read 0.002, 0.004, … */
const EMPTY_RANGE_MICROS = 1_000_000;

const dayOf = (unixSeconds: number): string => new Date(unixSeconds * 1000).toISOString().slice(0, 10);

function wireCharts(): void {
  const data = document.getElementById('usage-charts');
  if (data === null) return;
  const charts = JSON.parse(data.textContent ?? '{}') as Record<string, Series>;
  for (const el of Array.from(document.querySelectorAll<HTMLElement>('.chart'))) {
    const s = charts[el.dataset['series'] ?? ''];
    if (s === undefined || s.series.length === 0) continue;
    const days = s.x.length;
    const totals = s.series.map((x) => x.micros.reduce((a, b) => a + b, 0));
    const opts: uPlot.Options = {
      width: Math.max(320, el.clientWidth || 640),
      height: 220,
      series: [
        // With no day under the cursor the legend names the range and each series' total, not "--".
        { label: 'Day', value: (_u: uPlot, v: number | null, _s: number, idx: number | null) => (idx === null || v === null ? `last ${days} days` : dayOf(v)) },
        ...s.series.map((x, i) => ({
          label: x.label,
          stroke: PALETTE[i % PALETTE.length],
          width: 2,
          value: (_u: uPlot, v: number | null, _s: number, idx: number | null) => formatMoneyRounded(idx === null || v === null ? (totals[i] ?? 0) : v),
        })),
      ],
      axes: [
        {},
        {
          label: 'USD',
          size: 80,
          incrs: MONEY_STEPS,
          // Whole micro-unit ticks, labelled with as many places as the step needs: no two alike.
          values: (_u: uPlot, splits: number[], _axis: number, _space: number, step: number) => {
            const labels = splits.map((v) => majorAmount(Math.round(v), axisPlaces(Math.round(step))));
            el.dataset['yTicks'] = labels.join(' ');
            return labels;
          },
        },
      ],
      scales: { y: { range: (_u: uPlot, _min: number, max: number) => [0, max > 0 ? max : EMPTY_RANGE_MICROS] } },
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
        const shown = ['requestId', 'requestedModel', 'servedBy', 'outcome', 'status', 'inputTokens', 'outputTokens', 'durationMs'];
        const charge = typeof body['chargeMicros'] === 'number' ? `charge: ${formatMoney(body['chargeMicros'])} (exact)` : 'charge: —';
        out.textContent = [...shown.map((k) => `${k}: ${String(body[k] ?? '—')}`), charge].join('\n');
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
