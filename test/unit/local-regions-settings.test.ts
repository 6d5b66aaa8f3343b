/**
 * `npm run start:regions`' settings: the regions (two or more, the home region first), the
 * replication lag and the front door's routing, each refused loudly when it cannot be right.
 */
import { DEFAULT_LAG_MS, DEFAULT_REGIONS, jitFrom, lagFrom, regionsFrom, routingFrom } from '../../local/regions/settings';

describe('start:regions settings', () => {
  it('defaults to two regions, the home region first, a 500 ms lag and spread routing', () => {
    expect(regionsFrom({})).toEqual(['us-east-1', 'us-west-2']);
    expect(regionsFrom({ SLUICE_REGIONS: ' ' })).toEqual([...DEFAULT_REGIONS]);
    expect(lagFrom({})).toBe(DEFAULT_LAG_MS);
    expect(routingFrom({})).toBe('spread');
  });

  it('takes the regions, lag and routing given', () => {
    expect(regionsFrom({ SLUICE_REGIONS: 'eu-west-1, eu-central-1,us-east-2' })).toEqual(['eu-west-1', 'eu-central-1', 'us-east-2']);
    expect(lagFrom({ SLUICE_REPLICATION_LAG_MS: '0' })).toBe(0);
    expect(lagFrom({ SLUICE_REPLICATION_LAG_MS: '2500' })).toBe(2500);
    expect(routingFrom({ SLUICE_FRONT_DOOR_ROUTING: 'ordered' })).toBe('ordered');
  });

  it.each([['us-east-1'], ['us-east-1,us-east-1'], ['us-east-1,US-WEST-2'], ['us-east-1,'], ['a b,c']])('refuses SLUICE_REGIONS=%j', (raw) => {
    expect(() => regionsFrom({ SLUICE_REGIONS: raw })).toThrow(/SLUICE_REGIONS must list two or more distinct region names/);
  });

  it.each([['-1'], ['1.5'], ['soon'], ['600001']])('refuses SLUICE_REPLICATION_LAG_MS=%j', (raw) => {
    expect(() => lagFrom({ SLUICE_REPLICATION_LAG_MS: raw })).toThrow(/SLUICE_REPLICATION_LAG_MS must be 0 to 600000/);
  });

  it("compiles the regions' DynamoDB Locals fully unless told quick, and refuses anything else", () => {
    expect(jitFrom({})).toBe('full');
    expect(jitFrom({ SLUICE_DYNAMODB_JIT: '' })).toBe('full');
    expect(jitFrom({ SLUICE_DYNAMODB_JIT: 'full' })).toBe('full');
    expect(jitFrom({ SLUICE_DYNAMODB_JIT: 'quick' })).toBe('quick');
    expect(() => jitFrom({ SLUICE_DYNAMODB_JIT: 'c1' })).toThrow(/SLUICE_DYNAMODB_JIT must be full or quick, got "c1"/);
  });

  it('refuses a routing it does not know', () => {
    expect(() => routingFrom({ SLUICE_FRONT_DOOR_ROUTING: 'nearest' })).toThrow(/spread or ordered/);
  });
});
