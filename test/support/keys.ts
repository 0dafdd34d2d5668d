/** Sightline keys for gateway tests: a `gateway`-scoped key of a team, with the team's settings when given. */
import { parseKeyInput, type MemoryDirectory, type TeamSettings } from '@sightline/directory';

/** A new key's secret; `extra` adds key fields (limits, budget, …). */
export async function gatewayKey(directory: MemoryDirectory, team: string, extra: Record<string, unknown> = {}, settings: TeamSettings | null = null): Promise<string> {
  const now = Date.now();
  if (settings !== null) await directory.putTeam(team, settings, now);
  return (await directory.createKey(parseKeyInput({ team, name: 'k', scopes: ['gateway'], ...extra }, now), now)).secret;
}
