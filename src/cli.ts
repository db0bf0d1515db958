#!/usr/bin/env node
// `serval`: parse flags, start the server, stop cleanly on SIGINT/SIGTERM.
import { ServalError, statusText } from './kernel/errors.js';
import { tuneHeapGrowth } from './kernel/heap.js';
import { createLogger, LogControl, type LogFormat } from './kernel/log.js';
import { BadOptionError, parseArgs, USAGE, UsageError } from './options.js';
import { StartupError, startServer } from './server.js';

async function main(): Promise<number> {
  tuneHeapGrowth();
  let opts: ReturnType<typeof parseArgs>;
  try {
    opts = parseArgs(process.argv.slice(2));
  } catch (e) {
    if (e instanceof BadOptionError) {
      // tritonserver's layout: the usage first, then which option and why.
      process.stderr.write(`${USAGE}\nBad option: "--${e.flag}".\n${e.reason}\n\n`);
      return 1;
    }
    if (e instanceof UsageError) {
      process.stderr.write(`error: ${e.message}\n\n${USAGE}`);
      // tritonserver's status for a command line it cannot use.
      return 1;
    }
    throw e;
  }
  if (opts.help) {
    process.stdout.write(USAGE);
    return 0;
  }
  let logging: LogControl;
  try {
    logging = new LogControl({
      info: opts.logInfo,
      warning: opts.logWarning,
      error: opts.logError,
      verbose: opts.logVerbose,
      format: opts.logFormat as LogFormat, // checked by parseArgs
      file: opts.logFile,
    });
  } catch (e) {
    process.stderr.write(`error: ${(e as Error).message}\n`);
    return 1;
  }
  const log = createLogger(logging);
  // A bug must not take every other request down with it: log it and keep serving.
  process.on('unhandledRejection', (e) => log.error('unhandled rejection (bug)', { error: e instanceof Error ? e.stack : String(e) }));
  const print = (line: string): void => void process.stdout.write(`${line}\n`);
  let server: Awaited<ReturnType<typeof startServer>>;
  try {
    server = await startServer(opts, log, print, logging);
  } catch (e) {
    if (e instanceof StartupError || e instanceof ServalError) {
      // tritonserver's layout: `creating server: Invalid argument - <text>`.
      process.stderr.write(`error: creating server: ${statusText(e.code)} - ${e.message}\n`);
      return 1;
    }
    throw e;
  }
  const s = server;
  return new Promise<number>((resolve) => {
    let signalled = false;
    const onSignal = (sig: string): void => {
      if (signalled) {
        log.warn('second signal, exiting now', { signal: sig });
        resolve(1);
        return;
      }
      signalled = true;
      print(`Received ${sig}, shutting down (waiting up to ${opts.exitTimeoutSecs}s for in-flight requests)`);
      const timer = setTimeout(() => {
        log.warn('exit timeout reached with requests still in flight', { timeout_secs: opts.exitTimeoutSecs });
        resolve(1);
      }, opts.exitTimeoutSecs * 1000);
      s.stop().then(() => {
        clearTimeout(timer);
        resolve(0);
      });
    };
    process.on('SIGINT', () => onSignal('SIGINT'));
    process.on('SIGTERM', () => onSignal('SIGTERM'));
  });
}

main().then(
  (code) => process.exit(code),
  (e) => {
    process.stderr.write(`fatal: ${e instanceof Error ? e.stack : String(e)}\n`);
    process.exit(1);
  },
);
