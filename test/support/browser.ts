import { expect } from 'chai';
import express from 'express';
import { type Browser, chromium, type Page } from 'playwright-core';
import type { DataSource } from 'typeorm';
import { createDashboard, type DashboardOptions } from '../../src';
import { type Served, serve } from './dashboard-state';

/** Debian's chromium, never a downloaded browser. */
export async function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: '/usr/bin/chromium',
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run', '--disable-quic'],
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
