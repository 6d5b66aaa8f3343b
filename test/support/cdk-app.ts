/**
 * Apps for the CDK tests whose assemblies are removed when the test file ends. An `App` given no
 * `outdir` synthesizes into a fresh `cdk.out…` folder under the system's temporary folder and
 * leaves it there; a test run would leave a dozen behind.
 *
 * Call `cdkApps()` once at a test file's top level (it registers the clean-up); each `app()` then
 * synthesizes into a folder of its own.
 */
import { App, type AppProps } from 'aws-cdk-lib';
import { scratchDirs } from './scratch';

/** Skip bundling: for tests that compare resources, not the bundles (sluice-stack.test.ts bundles). */
export const NO_BUNDLING: AppProps = { context: { 'aws:cdk:bundling-stacks': [] } };

export function cdkApps(): (props?: AppProps) => App {
  const scratch = scratchDirs();
  return (props = {}) => new App({ ...props, outdir: scratch('sluice-cdk-test-') });
}
