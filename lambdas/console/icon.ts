/**
 * The console's icon: a small SVG (a sluice gate over water), declared by every page and also
 * answered at `/favicon.ico`, which browsers ask for on their own. Without it the browser's
 * console shows a 404 on every walk through the console (issue 22 item 13).
 */

/** Where the pages declare the icon (`<link rel="icon">`). */
export const CONSOLE_ICON_PATH = '/console/assets/icon.svg';

/** The paths the icon is answered at: the declared one and the browsers' conventional one. */
export const CONSOLE_ICON_PATHS: readonly string[] = [CONSOLE_ICON_PATH, '/favicon.ico'];

/** The icon itself: no script, no external reference (served under the console's strict CSP). */
export const CONSOLE_ICON_SVG = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32">
<rect width="32" height="32" rx="6" fill="#111827"/>
<rect x="7" y="5" width="4" height="18" fill="#f9fafb"/><rect x="21" y="5" width="4" height="18" fill="#f9fafb"/>
<rect x="11" y="8" width="10" height="8" fill="#93c5fd"/>
<path d="M4 24c3 0 3 2 6 2s3-2 6-2 3 2 6 2 3-2 6-2" fill="none" stroke="#60a5fa" stroke-width="2"/>
</svg>
`;
