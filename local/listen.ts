/**
 * Listening and closing for local mode's small HTTP servers (the management API, the console): the
 * port actually bound (0 asks the kernel for a free one) and a close that also ends keep-alive
 * connections, so a stop never waits on an idle client.
 */
import type { Server } from 'node:http';

/** Listens on `port` (0: any free one) at `host`; resolves to the port bound and a close. */
export async function listenOn(server: Server, port: number, host: string): Promise<{ readonly port: number; close(): Promise<void> }> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  const address = server.address();
  return {
    port: typeof address === 'object' && address !== null ? address.port : port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
