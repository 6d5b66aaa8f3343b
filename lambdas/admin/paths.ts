/** Where every management path begins; the CLI builds its URLs from it without loading the API. */
export const ADMIN_BASE_PATH = '/admin/v1';
