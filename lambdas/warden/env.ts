/** The warden's own environment (beside `ENV` and `REGION_ENV`); CDK sets it, the handler reads it. */
export const WARDEN_ENV = {
  /** Name of the secret holding the front door's configuration (JSON, `WardenConfig`). */
  configSecret: 'SLUICE_WARDEN_CONFIG_SECRET',
  /** Name of the secret holding the probe workspace's key. */
  probeKeySecret: 'SLUICE_WARDEN_PROBE_KEY_SECRET',
} as const;
