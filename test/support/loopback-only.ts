/**
 * Whether a local service listens on 127.0.0.1 only: it answers there, and a connection to any
 * other address of this machine is refused. Used on every DynamoDB Local the project starts
 * (`npm start`'s, the tests', a standalone one), since anyone who reaches it can read and rewrite
 * every table around the admin token and the audit trail.
 */
import { connect } from 'node:net';
import { networkInterfaces } from 'node:os';

/**
 * This machine's addresses that are not loopback: every non-internal IPv4 address, and every
 * non-internal IPv6 one but link-local (which needs an interface to be reached at all).
 */
export function nonLoopbackAddresses(): string[] {
  const out: string[] = [];
  for (const list of Object.values(networkInterfaces())) {
    for (const a of list ?? []) {
      if (a.internal) continue;
      if (a.family === 'IPv6' && /^fe80:/i.test(a.address)) continue;
      out.push(a.address);
    }
  }
  return out;
}

/** What a TCP connection to `host:port` meets: `connected`, `refused`, or another error's code. */
export function tryConnect(host: string, port: number, timeoutMs = 3_000): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect({ host, port });
    const done = (result: string): void => {
      socket.destroy();
      resolve(result);
    };
    socket.setTimeout(timeoutMs, () => done('timeout'));
    socket.once('connect', () => done('connected'));
    socket.once('error', (err: NodeJS.ErrnoException) => done(err.code === 'ECONNREFUSED' ? 'refused' : (err.code ?? err.message)));
  });
}

/**
 * Asserts that `port` answers on 127.0.0.1 and refuses every other address: another loopback
 * address (127.0.0.2, which a server bound to every interface accepts) and each of this machine's
 * network addresses. A machine with no network address cannot show the second part: the test
 * fails saying so rather than pass on half the evidence.
 */
export async function expectLoopbackOnly(port: number): Promise<void> {
  // Up on loopback, so the refusals below are its binding's, not a server that is down.
  expect({ host: '127.0.0.1', port, result: await tryConnect('127.0.0.1', port) }).toEqual({ host: '127.0.0.1', port, result: 'connected' });
  expect({ host: '127.0.0.2', port, result: await tryConnect('127.0.0.2', port) }).toEqual({ host: '127.0.0.2', port, result: 'refused' });
  const addresses = nonLoopbackAddresses();
  if (addresses.length === 0) {
    throw new Error(
      'This machine has no network address other than loopback (os.networkInterfaces() lists none), so nothing here can show ' +
        'that DynamoDB Local refuses connections from the network. Run this test on a machine with a network interface (CI has one).',
    );
  }
  for (const host of addresses) {
    expect({ host, port, result: await tryConnect(host, port) }).toEqual({ host, port, result: 'refused' });
  }
}
