/**
 * Jest transformer for the ESM-only packages the runtime uses (`@middy/core` 6 ships only ES
 * modules, and Jest 29 loads modules as CommonJS): esbuild, already the bundler, turns them into
 * CommonJS. TypeScript sources still go through ts-jest.
 */
const { transformSync } = require('esbuild');

module.exports = {
  process(source, filename) {
    const out = transformSync(source, { loader: 'js', format: 'cjs', target: 'node20', sourcefile: filename, sourcemap: 'inline' });
    return { code: out.code };
  },
};
