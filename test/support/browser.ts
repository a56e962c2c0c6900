import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import express from 'express';
import { type Browser, chromium, type Page } from 'playwright-core';
import type { DataSource } from 'typeorm';
import { createDashboard, type DashboardOptions } from '../../src';
import { type Served, serve } from './dashboard-state';

const DEBIAN_CHROMIUM = '/usr/bin/chromium';

/**
 * Debian's chromium when it is installed, else the Chromium that the npm package @sparticuz/chromium
 * ships (installed by `npm ci`; never a download). Its archive is unpacked once per machine: a child
 * process unpacks it into a private folder (the package writes into `os.tmpdir()` and edits its
 * process's environment), which is then renamed into place, so parallel test processes never see
 * a half-written binary.
 */
function bundledChromium(): { executablePath: string; fontconfig: string } {
  const root = join(__dirname, '..', '..');
  const manifest = join(root, 'node_modules', '@sparticuz', 'chromium', 'package.json');
  const version = (JSON.parse(readFileSync(manifest, 'utf8')) as { version: string }).version;
  const shared = join(tmpdir(), `typeorm-checkpoint-chromium-${version}`);
  if (!existsSync(join(shared, 'chromium'))) {
    const own = mkdtempSync(`${shared}.unpacking-`);
    try {
      const unpack = "const c = require('@sparticuz/chromium'); (c.default ?? c).executablePath().then((p) => process.stdout.write(p))";
      execFileSync(process.execPath, ['-e', unpack], {
        env: { ...process.env, TMPDIR: own },
        cwd: root,
        stdio: ['ignore', 'pipe', 'inherit'],
      });
      renameSync(own, shared);
    } catch (error) {
      rmSync(own, { recursive: true, force: true }); // failed, or another process published it first
      if (!existsSync(join(shared, 'chromium'))) throw error;
    }
  }
  return { executablePath: join(shared, 'chromium'), fontconfig: join(shared, 'fonts') };
}

/** Headless Chromium driven by playwright-core: Debian's when installed, else the one in node_modules. */
export async function launchChromium(): Promise<Browser> {
  const args = [
    '--no-sandbox',
    '--disable-gpu',
    '--disable-background-networking',
    '--disable-component-update',
    '--disable-sync',
    '--no-first-run',
    '--disable-quic',
    '--disable-dev-shm-usage',
  ];
  if (existsSync(DEBIAN_CHROMIUM)) return chromium.launch({ executablePath: DEBIAN_CHROMIUM, args });
  const bundled = bundledChromium();
  return chromium.launch({
    executablePath: bundled.executablePath,
    args,
    // The machine's fontconfig: with the package's own (one font) Chromium aborts on a font fallback.
    env: existsSync('/etc/fonts/fonts.conf') ? process.env : { ...process.env, FONTCONFIG_PATH: bundled.fontconfig },
  });
}

/** Collects what would mean a broken page: console errors (CSP violations among them), page errors, failed responses. */
export function watchProblems(page: Page): string[] {
  const problems: string[] = [];
  page.on('console', (message) => {
    if (message.type() === 'error') problems.push(`console: ${message.text()}`);
  });
  page.on('pageerror', (error) => problems.push(`pageerror: ${error.message}`));
  page.on('response', (response) => {
    if (response.status() >= 400) problems.push(`${response.status()} ${response.url()}`);
  });
  // A live-refresh fetch still in flight when the test navigates away is aborted: not a problem.
  page.on('requestfailed', (request) => {
    if (request.failure()?.errorText !== 'net::ERR_ABORTED') problems.push(`failed ${request.url()}: ${request.failure()?.errorText}`);
  });
  return problems;
}

/** Visits every link of the page's navigation and the page's own links under `base`; returns the paths visited. */
export async function visitLinks(page: Page, base: string): Promise<string[]> {
  const links = await Promise.all((await page.locator('a[href]').all()).map(async (a) => (await a.getAttribute('href')) ?? ''));
  const unique = [...new Set(links)].filter((link) => !link.includes('jobs/reset'));
  for (const link of unique) {
    expect(link, link).to.match(new RegExp(`^${base.replace(/[/]/g, '\\/')}`));
    const response = await page.goto(new URL(link, page.url()).toString());
    expect(response?.status(), link).to.equal(200);
  }
  return unique;
}

/** Where `useDashboardBrowser` mounts the dashboard: a nested base path. */
export const DASHBOARD_BASE = '/admin/ops/';

export interface DashboardBrowser {
  readonly browser: Browser;
  /** The server's origin, e.g. `http://127.0.0.1:41234`. */
  readonly url: string;
  /** A new page at `path` under the mount point, checked to be 200 with the application's CSP; its problems collected. */
  open(path: string): Promise<{ page: Page; problems: string[] }>;
}

/**
 * For a mocha suite: Chromium, and the dashboard over `ds()` mounted in Express under
 * `DASHBOARD_BASE`, behind the application's own `Content-Security-Policy: default-src 'self'`,
 * refreshing every 150 ms (both closed after the suite).
 */
export function useDashboardBrowser(ds: () => DataSource, options: DashboardOptions = {}): DashboardBrowser {
  let browser: Browser | undefined;
  let server: Served | undefined;

  before(async () => {
    browser = await launchChromium();
    const app = express();
    app.use((_req, res, next) => {
      res.setHeader('Content-Security-Policy', "default-src 'self'");
      next();
    });
    app.use(DASHBOARD_BASE.replace(/\/$/, ''), createDashboard(ds(), { refreshMs: 150, ...options }));
    server = await serve(app);
  });

  after(async () => {
    await browser?.close();
    await server?.close();
  });

  return {
    get browser() {
      return browser!;
    },
    get url() {
      return server!.url;
    },
    async open(path) {
      const page = await browser!.newPage({ viewport: { width: 1280, height: 900 } });
      const problems = watchProblems(page);
      const response = await page.goto(`${server!.url}${DASHBOARD_BASE}${path}`);
      expect(response?.status(), path).to.equal(200);
      expect(response?.headers()['content-security-policy'], path).to.equal("default-src 'self'");
      return { page, problems };
    },
  };
}
