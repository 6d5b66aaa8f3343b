/**
 * Provider calls over node:http(s) with keep-alive agents: the response body is a Readable that
 * the relay consumes chunk by chunk, so nothing is buffered beyond what the client has not read.
 */
import http from 'node:http';
import https from 'node:https';
import type { Upstream, UpstreamRequest, UpstreamResponse } from '../gateway/ports';

const agentOptions = { keepAlive: true, keepAliveMsecs: 30_000, maxSockets: 256 };

export class HttpUpstream implements Upstream {
  private readonly httpAgent = new http.Agent(agentOptions);
  private readonly httpsAgent = new https.Agent(agentOptions);

  send(request: UpstreamRequest): Promise<UpstreamResponse> {
    const url = new URL(request.url);
    const secure = url.protocol === 'https:';
    const transport = secure ? https : http;
    return new Promise((resolve, reject) => {
      const req = transport.request(
        url,
        { method: 'POST', headers: request.headers, agent: secure ? this.httpsAgent : this.httpAgent, signal: request.signal },
        (res) => {
          res.socket?.setNoDelay(true);
          const headers: Record<string, string | undefined> = {};
          for (const [name, value] of Object.entries(res.headers)) headers[name] = Array.isArray(value) ? value.join(', ') : value;
          resolve({ status: res.statusCode ?? 502, headers, body: res });
        },
      );
      req.on('error', reject);
      req.setNoDelay(true);
      req.end(request.body);
    });
  }

  /** Closes idle sockets (local mode and tests). */
  close(): void {
    this.httpAgent.destroy();
    this.httpsAgent.destroy();
  }
}
