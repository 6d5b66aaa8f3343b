/**
 * Jest global setup: one in-memory DynamoDB Local for the whole run. Its endpoint reaches the
 * workers through `process.env` (jest hands globalSetup's environment to them); each test file
 * then makes its own tables under a fresh prefix with `testTables()`, so files never collide.
 */
import { spawnSync } from 'node:child_process';
import { type DynamoLocal, startDynamoLocal } from '../../local/dynamo-local';

/** Environment variable carrying the shared DynamoDB Local endpoint to the test workers. */
export const TEST_ENDPOINT_ENV = 'SLUICE_TEST_DYNAMODB_ENDPOINT';

/** Environment variable carrying its PID, for a teardown that cannot see the handle. */
export const TEST_PID_ENV = 'SLUICE_TEST_DYNAMODB_PID';

/** Where setup leaves the handle for teardown (the two run in the same process and realm). */
export const HANDLE_KEY = '__sluiceTestDynamoLocal';

type Holder = { [HANDLE_KEY]?: DynamoLocal };

/** Starts the run's DynamoDB Local (in memory) and publishes its endpoint and PID. */
export default async function globalSetup(): Promise<void> {
  // Workers inherit this: the SDK's notice that it will need Node 22 is noise in every suite.
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
  // The npm and npx the suites start (CDK's bundler runs `npx esbuild`, the sweeper test `npx tsx`)
  // would print a machine's npm configuration warnings into the run; their errors still show.
  process.env.npm_config_loglevel ??= 'error';
  const java = spawnSync('java', ['-version'], { stdio: 'ignore' });
  if (java.error !== undefined || java.status !== 0) {
    throw new Error(
      'The integration tests run against Amazon DynamoDB Local, which needs Java 17 or later on PATH ' +
        '(`java -version` failed). Install a JRE, e.g. `apt-get install openjdk-17-jre-headless`.',
    );
  }
  // Not detached: if jest is interrupted (Ctrl-C reaches the whole process group) Java goes too.
  const db = await startDynamoLocal({ readyTimeoutMs: 60_000 });
  (globalThis as Holder)[HANDLE_KEY] = db;
  process.env[TEST_ENDPOINT_ENV] = db.endpoint;
  process.env[TEST_PID_ENV] = String(db.pid);
  // Last resort if jest exits without running teardown: end Java by its PID, synchronously.
  process.once('exit', () => {
    // Teardown removes the handle once Java is gone; only a live handle's PID is ours to end.
    if ((globalThis as Holder)[HANDLE_KEY] !== db) return;
    try {
      process.kill(db.pid, 'SIGKILL');
    } catch {
      // Already gone.
    }
  });
}
