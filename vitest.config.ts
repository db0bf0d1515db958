import { defineConfig } from 'vitest/config';

// Two projects:
//  - unit: pure in-process tests, run in parallel, short timeouts.
//  - integration: each file starts the built server (dist/) as a child process with ONNX Runtime
//    worker threads. On a 2-core machine these files run one at a time (the event-loop latency
//    test in particular must not compete with another server for the CPU), and only after the
//    unit tests have finished.
export default defineConfig({
  test: {
    // Together the two projects cover test/**/*.test.ts. (No root `include`: `extends: true`
    // would merge it into both projects and run every file twice.)
    projects: [
      {
        extends: true,
        test: {
          name: 'unit',
          include: ['test/unit/**/*.test.ts'],
          testTimeout: 15_000,
          sequence: { groupOrder: 0 },
        },
      },
      {
        extends: true,
        test: {
          name: 'integration',
          include: ['test/integration/**/*.test.ts'],
          globalSetup: ['test/integration/global_setup.ts'],
          testTimeout: 60_000,
          hookTimeout: 60_000,
          fileParallelism: false,
          maxWorkers: 1,
          sequence: { groupOrder: 1 },
        },
      },
    ],
  },
});
