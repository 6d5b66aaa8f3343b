#!/usr/bin/env node
// The `sluice` operator CLI. tsx compiles cli/*.ts on the fly, so the CLI needs no build step.
'use strict';
// The AWS SDK prints a ten-line notice about future Node versions on every run; on an operator
// CLI it would bury the one-line result. Anyone who wants it can set the variable to false.
if (process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED === undefined) {
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED = 'true';
}
require('tsx/cjs');
const { quietOnClosedPipe, run } = require('../cli/main.ts');

// `sluice … | head`: a closed pipe ends the output quietly, as Unix tools do (see cli/main.ts).
quietOnClosedPipe();
run(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err) => {
    process.stderr.write(`sluice: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exitCode = 1;
  },
);
