/** SPEC's fixed limits, each with one home: the gateway, the local server and the operator tools read them here. */

/** SPEC: request bodies over this many bytes are refused 413 `payload_too_large`. */
export const MAX_BODY_BYTES = 8_388_608;
/** SPEC's default spend rate cap, minor units per rolling 60 s. */
export const DEFAULT_SPEND_RATE_CAP_MINOR = 5000;
