/** Jest global teardown: stops the run's DynamoDB Local by its PID. */
import { type DynamoLocal, isDynamoLocalProcess, stopByPid } from '../../local/dynamo-local';
import { HANDLE_KEY, TEST_PID_ENV } from './global-setup';

type Holder = { [HANDLE_KEY]?: DynamoLocal };

/** Stops the DynamoDB Local the global setup started; resolves once the process has exited. */
export default async function globalTeardown(): Promise<void> {
  const holder = globalThis as Holder;
  const db = holder[HANDLE_KEY];
  if (db !== undefined) {
    // SIGTERM to its PID, SIGKILL after a grace period; resolves on the exit event.
    await db.stop();
    delete holder[HANDLE_KEY];
    return;
  }
  // Setup ran but its handle is not visible here: fall back to the PID it recorded, checked to
  // still be DynamoDB Local (a PID can be reused).
  const pid = Number(process.env[TEST_PID_ENV]);
  if (Number.isSafeInteger(pid) && pid > 0 && isDynamoLocalProcess(pid)) await stopByPid(pid);
}
