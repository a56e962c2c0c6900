import { expect } from 'chai';
import { type Browser, chromium, type Page } from 'playwright-core';

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
