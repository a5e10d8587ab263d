#!/usr/bin/env node
import { ConfigError } from './config.js';
import { serve } from './serve.js';

serve().catch((error: unknown) => {
  process.stderr.write(error instanceof ConfigError ? `${error.message}\n` : `intake: ${(error as Error).stack ?? error}\n`);
  process.exit(1);
});
