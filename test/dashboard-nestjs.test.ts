import { type INestApplication, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { ExpressAdapter } from '@nestjs/platform-express';
import { TypeOrmModule, type TypeOrmModuleOptions } from '@nestjs/typeorm';
import { expect } from 'chai';
import type { Browser } from 'playwright-core';
import { checkpointMigrations, dataSourceOptionsFromUrl } from '../src';
import { CheckpointModule } from '../src/nestjs';
import { launchChromium, visitLinks, watchProblems } from './support/browser';
import { DRIVER, sql, useTestDatabase } from './support/database';
import { type DashboardState, HOSTILE, makeState } from './support/dashboard-state';
import { expectCode } from './support/expect-code';

describe(`dashboard in NestJS under a global prefix (${DRIVER})`, function () {
  const db = useTestDatabase('dashboard_nestjs');
  let app: INestApplication;
  let browser: Browser;
  let base: string;
  let state: DashboardState;

  before(async () => {
    state = await makeState(db.ds);
    @Module({
      imports: [
        TypeOrmModule.forRoot({
          ...dataSourceOptionsFromUrl(db.url),
          migrations: checkpointMigrations,
          retryAttempts: 0,
          autoLoadEntities: true,
        } as TypeOrmModuleOptions),
        CheckpointModule.forRoot({ dashboard: { path: '/ops/', refreshMs: 0 } }),
      ],
    })
    class AppModule {}
    app = await NestFactory.create(AppModule, new ExpressAdapter(), { logger: false });
    app.setGlobalPrefix('api/v1');
    await app.listen(0, '127.0.0.1');
    base = (await app.getUrl()).replace('[::1]', '127.0.0.1');
    browser = await launchChromium();
  });

  after(async () => {
    await browser?.close();
    await app?.close();
  });

  it('serves the dashboard at <global prefix>/<path>, redirecting the bare path to its slash', async () => {
    const bare = await fetch(`${base}/api/v1/ops`, { redirect: 'manual' });
    expect(bare.status).to.equal(302);
    expect(bare.headers.get('location')).to.equal('/api/v1/ops/');
    const overview = (await (await fetch(`${base}/api/v1/ops/api/overview`)).json()) as { page: string; files: { dead: number } };
    expect(overview).to.include({ page: 'overview' });
    expect(overview.files.dead).to.equal(1);
    // Not under the prefix: Nest's own 404.
    expect((await fetch(`${base}/ops/`)).status).to.equal(404);
  });

  it("has no broken links or assets in the browser, and a click on Requeue works through Nest's body parser", async () => {
    const page = await browser.newPage();
    const problems = watchProblems(page);
    await page.goto(`${base}/api/v1/ops/`);
    expect(await page.locator('main').innerText()).to.include(HOSTILE.file);
    const visited = await visitLinks(page, '/api/v1/ops/');
    expect(visited).to.include('/api/v1/ops/files');
    await page.goto(`${base}/api/v1/ops/files?status=dead`);
    await page.getByRole('button', { name: 'Requeue', exact: true }).click();
    await page.waitForURL(`${base}/api/v1/ops/files?status=dead`);
    const rows = (await db.ds.query(sql('SELECT status FROM file_checkpoints WHERE file_url = ?'), [state.deadUrl])) as {
      status: string;
    }[];
    expect(rows[0].status).to.equal('pending');
    expect(problems).to.deep.equal([]);
    await page.close();
  });

  it("refuses a dashboard path that does not start with '/' (INVALID_ARGUMENT)", async () => {
    await expectCode(
      Promise.resolve().then(() => CheckpointModule.forRoot({ dashboard: { path: 'ops' } })),
      'INVALID_ARGUMENT',
    );
  });

  it('forRootAsync takes the dashboard too', async () => {
    @Module({
      imports: [
        TypeOrmModule.forRoot({
          ...dataSourceOptionsFromUrl(db.url),
          migrations: checkpointMigrations,
          retryAttempts: 0,
          autoLoadEntities: true,
        } as TypeOrmModuleOptions),
        CheckpointModule.forRootAsync({ useFactory: () => ({}), dashboard: { path: '/ops', readOnly: true } }),
      ],
    })
    class AsyncAppModule {}
    const other = await NestFactory.create(AsyncAppModule, new ExpressAdapter(), { logger: false });
    try {
      other.setGlobalPrefix('admin');
      await other.listen(0, '127.0.0.1');
      const url = (await other.getUrl()).replace('[::1]', '127.0.0.1');
      const page = await fetch(`${url}/admin/ops/files?status=dead`);
      expect(page.status).to.equal(200);
      expect(await page.text())
        .to.include('read-only')
        .and.not.include('method="post"');
    } finally {
      await other.close();
    }
  });
});
