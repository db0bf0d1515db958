import { defineConfig } from 'vitest/config';

// The deployment checks that need tools installed by tools/ci/deploy-checks.sh (Debian's
// chromium, perf_analyzer from .venv): not part of the default `vitest run`.
export default defineConfig({
  test: {
    include: ['test/deploy/**/*.test.ts'],
    testTimeout: 120_000,
    hookTimeout: 60_000,
    fileParallelism: false,
  },
});
