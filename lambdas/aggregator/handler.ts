/**
 * PLACEHOLDER written by the CDK work so that `cdk synth` can bundle an entry point; the real
 * handler replaces this file.
 */
export async function handler(): Promise<void> {
  throw new Error("aggregator handler not implemented yet");
}
