/** Where every management path begins; the CLI builds its URLs from it without loading the API. */
export const ADMIN_BASE_PATH = '/admin/v1';
/**
 * The header a `409 configuration_home_elsewhere` names the configuration home in (SPEC's envelope
 * has no field for it): the CLI reads it to say where to send the change.
 */
export const CONFIGURATION_HOME_HEADER = 'x-sluice-configuration-home';
