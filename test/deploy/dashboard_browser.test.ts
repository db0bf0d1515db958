// The live dashboard in a real browser: Debian's headless chromium driven by puppeteer-core (no
// browser download), against the built server serving the bundled model repository. The page must
// load without console errors, show a card for every bundled model, and its numbers must move
// while perf_analyzer loads `simple`. tools/ci/deploy-checks.sh installs chromium and runs this
// after the conformance suite has set up .venv (perf_analyzer).
//   SERVAL_DASHBOARD_SCREENSHOT=docs/images/dashboard.png  also writes the README's screenshot.
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync } from 'node:fs';
import path from 'node:path';
import puppeteer, { type Browser, type Page } from 'puppeteer-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT } from '../helpers/paths.js';
import { type ServerHandle, startServer } from '../helpers/server.js';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const PERF_ANALYZER = process.env.PERF_ANALYZER ?? path.join(ROOT, '.venv', 'bin', 'perf_analyzer');
const REPO = path.join(ROOT, 'model_repository');
const SHOT = path.join(ROOT, 'tmp', 'deploy', 'dashboard.png');

const bundledModels = readdirSync(REPO, { withFileTypes: true })
  .filter((e) => e.isDirectory() && existsSync(path.join(REPO, e.name, 'config.pbtxt')))
  .map((e) => e.name)
  .sort();

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The numbers of one model's card, as the page shows them. */
async function cardNumbers(page: Page, model: string): Promise<Record<string, string>> {
  return page.$$eval(`[data-model="${model}"] [data-field]`, (els) =>
    Object.fromEntries(els.map((e) => [e.getAttribute('data-field') ?? '', e.textContent ?? ''])),
  );
}

describe('GET /dashboard in headless chromium', () => {
  let server: ServerHandle;
  let browser: Browser;
  let page: Page;
  const problems: string[] = [];

  beforeAll(async () => {
    for (const [what, file] of [
      ['Debian chromium', CHROMIUM],
      ['perf_analyzer', PERF_ANALYZER],
    ]) {
      if (!existsSync(file!)) throw new Error(`${what} not found at ${file}: run tools/ci/deploy-checks.sh (it installs it)`);
    }
    // Every bundled model gets a card, loaded or not; a model that cannot load here is shown so.
    server = await startServer(REPO, ['--exit-on-error', 'false', '--strict-readiness', 'false']);
    browser = await puppeteer.launch({
      executablePath: CHROMIUM,
      headless: true,
      // Root in CI (no sandbox), and no background traffic: the machine has no network.
      args: [
        '--no-sandbox',
        '--disable-gpu',
        '--disable-dev-shm-usage',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
        '--disable-quic',
      ],
    });
    page = await browser.newPage();
    await page.setViewport({ width: 1400, height: 1000 });
    page.on('console', (m) => {
      if (m.type() === 'error') problems.push(`console.error: ${m.text()}`);
    });
    page.on('pageerror', (e) => problems.push(`page error: ${(e as Error).message}`));
    page.on('requestfailed', (r) => problems.push(`request failed: ${r.url()} ${r.failure()?.errorText}`));
    page.on('response', (r) => {
      if (r.status() >= 400) problems.push(`HTTP ${r.status()} for ${r.url()}`);
    });
  });

  afterAll(async () => {
    await browser?.close();
    await server?.stop();
  });

  it('loads with no console errors and shows every bundled model', async () => {
    await page.goto(`${server.url}/dashboard`, { waitUntil: 'load' });
    await page.waitForSelector('[data-model="simple"]', { timeout: 15_000 });
    const shown = await page.$$eval('[data-model]', (els) => els.map((e) => e.getAttribute('data-model') ?? ''));
    expect(bundledModels.length).toBeGreaterThan(0);
    for (const m of bundledModels) expect(shown, `card for ${m}`).toContain(m);
    const simple = await cardNumbers(page, 'simple');
    expect(simple.state).toBe('READY');
    expect(await page.$eval('#server-version', (e) => e.textContent)).toMatch(/serval \d+\.\d+\.\d+/);
    expect(problems).toEqual([]);
  });

  it('its numbers move while perf_analyzer runs', async () => {
    const before = await cardNumbers(page, 'simple');
    const pa = spawn(
      PERF_ANALYZER,
      ['-m', 'simple', '-u', server.grpcAddress, '-i', 'grpc', '--concurrency-range', '2', '-p', '1500', '-r', '4', '-s', '90'],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let paOut = '';
    pa.stdout.on('data', (d: Buffer) => (paOut += d.toString()));
    pa.stderr.on('data', (d: Buffer) => (paOut += d.toString()));
    const exited = new Promise<number | null>((resolve) => pa.once('exit', resolve));
    let running = true;
    void exited.then(() => (running = false));

    // Sample the card while the load runs: the request count must grow and the rate be positive.
    const totals: number[] = [];
    let sawRate = false;
    const deadline = Date.now() + 60_000;
    while (running && Date.now() < deadline) {
      await sleep(700);
      const n = await cardNumbers(page, 'simple');
      totals.push(Number(n.total));
      if (Number(n.rps) > 0) sawRate = true;
    }
    if (running) pa.kill('SIGKILL');
    // perf_analyzer's own verdict (a stable measurement) is not what is tested here, only that
    // its load shows; its output goes with any failure below.
    const code = await exited;
    const ran = `perf_analyzer exit ${code}:\n${paOut.slice(-2000)}`;
    await sleep(1500); // one more poll after the last request
    const after = await cardNumbers(page, 'simple');

    expect(totals.length, `samples taken while perf_analyzer ran; ${ran}`).toBeGreaterThan(2);
    expect(new Set(totals).size, `request counts seen during the run: ${totals.join(' ')}; ${ran}`).toBeGreaterThan(2);
    expect(sawRate, ran).toBe(true);
    expect(Number(after.total), ran).toBeGreaterThan(Number(before.total));
    // Percentiles come from the latency histogram: present once requests have run.
    expect(after.p50).toMatch(/\d+(\.\d+)? (µs|ms|s)$/);
    expect(after.p99).toMatch(/\d+(\.\d+)? (µs|ms|s)$/);
    // Every execution of `simple` (no dynamic batching) is batch size 1 here: one bar.
    const bars = await page.$$eval('[data-model="simple"] svg rect title', (ts) => ts.map((t) => t.textContent ?? ''));
    expect(bars.some((t) => /^batch 1: [1-9]\d* executions$/.test(t))).toBe(true);
    // The instance's busy share shows.
    const busy = await page.$$eval('[data-model="simple"] .busy > span:last-child', (els) => els.map((e) => e.textContent ?? ''));
    expect(busy.some((b) => /^\d+%$/.test(b))).toBe(true);

    mkdirSync(path.dirname(SHOT), { recursive: true });
    await page.screenshot({ path: SHOT as `${string}.png`, fullPage: false });
    const readme = process.env.SERVAL_DASHBOARD_SCREENSHOT;
    if (readme) await page.screenshot({ path: path.resolve(ROOT, readme) as `${string}.png`, fullPage: false });
    expect(problems).toEqual([]);
  });
});
