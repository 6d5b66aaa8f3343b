/**
 * `sluice stage config-home [<region>]`: where a stage with several regions accepts changes (the
 * configuration home), and moving it (docs/regions.md, "Configuration"; operations.md, "Several
 * regions"). The move is sent to the management API of the region that becomes the home (its
 * stack's AdminUrl, as `--endpoint` or `SLUICE_ADMIN_URL`): that region records it in its own
 * replica, so it works while the old home is lost. Without a region, it shows what the region
 * asked believes (a region the move has not reached yet still names the old home).
 */
import { AdminApiError, apiPath } from '../api-client';
import type { Command, Outcome } from '../commands';

/** What the management API answers for the configuration home. */
export interface ConfigHomeBody {
  readonly regions: readonly string[] | null;
  readonly region: string | null;
  readonly stageHome: string | null;
  readonly configurationHome: string | null;
  readonly acceptsChanges: boolean;
  readonly move: { readonly region: string; readonly generation: number; readonly at: string; readonly by: string; readonly requestId: string } | null;
  /** On a move: the configuration home before it, as the target region read it. */
  readonly previous?: string;
}

const ONE_REGION = 'this stage runs in one region: its configuration home is where it runs, and there is nothing to move';

/** The lines a person reads. */
export function describeConfigHome(body: ConfigHomeBody): string[] {
  if (body.regions === null || body.configurationHome === null) return [ONE_REGION];
  const home = body.configurationHome;
  const lines: string[] = [];
  if (body.previous !== undefined) {
    lines.push(
      `configuration home: ${home} (was ${body.previous}), recorded in ${body.region ?? home} as move ${body.move?.generation ?? 0}`,
      `changes are accepted here (${home}) now; every other region's management API refuses them once the move has replicated there (usually under a second) and its 5 s cache has passed.`,
      `a region the move has not reached (a lost region, until its replica catches up) still believes it is the home: send every change to ${home}'s AdminUrl, and check a returning region with sluice stage config-home --endpoint <its AdminUrl>.`,
    );
  } else {
    const how = body.move === null ? `the stage's home region, never moved` : `moved by ${body.move.by} at ${body.move.at}, move ${body.move.generation}; the stage's home region is ${body.stageHome ?? '?'}`;
    lines.push(`configuration home: ${home} (${how})`);
    lines.push(body.acceptsChanges ? `this management API (${body.region ?? '?'}) accepts changes` : `this management API (${body.region ?? '?'}) only reads: changes go to ${home}'s AdminUrl`);
  }
  lines.push(`regions: ${body.regions.join(', ')} (as this management API reads its replica)`);
  return lines;
}

/** The `stage` group's commands. */
export const STAGE_COMMANDS: readonly Command[] = [
  {
    group: 'stage',
    action: 'config-home',
    summary: 'show where changes are accepted (the configuration home); with a region, move it there (send it to that region\'s AdminUrl)',
    usage: '[<region>]',
    options: {},
    positionals: [0, 1],
    async run(api, _values, positionals): Promise<Outcome> {
      const path = apiPath('stage', 'config-home');
      const region = positionals[0];
      if (region === undefined) {
        const out = await api.call<ConfigHomeBody>({ method: 'GET', path });
        return { json: out, human: describeConfigHome(out) };
      }
      try {
        const out = await api.call<ConfigHomeBody>({ method: 'PUT', path, body: { region } });
        return { json: { moved: true, ...out }, human: describeConfigHome(out) };
      } catch (err) {
        // A stage with one region: nothing to move, and nothing wrong.
        if (err instanceof AdminApiError && err.code === 'nothing_to_move') return { json: { moved: false, reason: err.message }, human: [ONE_REGION] };
        throw err;
      }
    },
  },
];
