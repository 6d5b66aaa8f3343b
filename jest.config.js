/** @type {import('jest').Config} */
module.exports = {
  // Quiet on success: a test's console and stderr output is shown only when it fails
  // (SLUICE_TEST_VERBOSE=1, set by `npm run test:verbose`, shows everything as it happens).
  testEnvironment: '<rootDir>/test/support/quiet-environment.ts',
  roots: ['<rootDir>/test'],
  testMatch: ['**/*.test.ts'],
  transform: {
    // Type checking is `tsc --noEmit` in `npm test`; jest only transpiles.
    '^.+\\.ts$': ['ts-jest', { diagnostics: false }],
    // ESM-only dependencies (@middy/core 6) become CommonJS for Jest 29.
    '^.+/node_modules/@middy/.+\\.js$': '<rootDir>/test/support/esm-transform.js',
  },
  transformIgnorePatterns: ['/node_modules/(?!@middy/)'],
  globalSetup: '<rootDir>/test/support/global-setup.ts',
  globalTeardown: '<rootDir>/test/support/global-teardown.ts',
  // A test's own time, beyond which it is failed as hung. With three suites on two cores the CPU-heavy
  // ones (a CDK synthesis that bundles, a browser, a soak) took up to two thirds of the 30 s this was.
  testTimeout: 60000,
  // Three suites at once on CI's 2 cores: many suites wait part of their time (a sleep past a cache
  // time or an expiry, a sweeper's next run, a child process starting), and a third suite uses the
  // CPU they leave idle.
  maxWorkers: 3,
};
