/**
 * Picks a TCP port nobody is listening on, so local mode and tests never collide with each other
 * or with a developer's own services.
 */
import { createServer } from 'node:net';

/**
 * Asks the kernel for a free port by listening on port 0 and closing again.
 *
 * There is a window between closing and the caller binding the port in which another process
 * could take it; callers that spawn a server on the port retry on "address in use".
 *
 * @param host - Interface to probe. The default (all interfaces) is the strictest check: a port
 *   free there is free on loopback too, whatever the caller then binds.
 */
export function freePort(host = '0.0.0.0'): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.once('error', reject);
    server.listen({ port: 0, host, exclusive: true }, () => {
      const address = server.address();
      if (address === null || typeof address === 'string') {
        server.close();
        reject(new Error('could not read the probed port'));
        return;
      }
      const { port } = address;
      server.close((err) => (err ? reject(err) : resolve(port)));
    });
  });
}
