/**
 * `npm run test:unit`: the pure core and the other unit suites, with no DynamoDB Local (and so no
 * Java) behind them. The inner loop; `npm test` runs these and everything else.
 * @type {import('jest').Config}
 */
const base = require('./jest.config');

module.exports = {
  ...base,
  roots: ['<rootDir>/test/unit'],
  globalSetup: undefined,
  globalTeardown: undefined,
};
