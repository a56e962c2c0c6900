import { expect } from 'chai';
import { type Child, startChild } from './support/child';
import { DRIVER, sql, useTestDatabase } from './support/database';
import { type DashboardState, makeState } from './support/dashboard-state';

describe(`typeorm-checkpoint dashboard (${DRIVER})`, function () {
  const db = useTestDatabase('dashboard_cli');
  let state: DashboardState;
  let child: Child | undefined;

  before(async () => {
    state = await makeState(db.ds);
  });

  afterEach(async () => {
    if (child && child.process.exitCode === null && child.process.signalCode === null) {
      child.process.kill('SIGKILL');
      await child.exited;
    }
  });

  it('serves the dashboard on 127.0.0.1 by default; --read-only refuses actions; SIGTERM stops it (exit 0)', async () => {
    child = startChild('src/cli/main.ts', ['dashboard', '--db', db.url, '--port', '0', '--read-only', '--json']);
    const listening = JSON.parse(await child.waitForLine((line) => line.includes('"listening"'))) as { url: string; readOnly: boolean };
    expect(listening.url).to.match(/^http:\/\/127\.0\.0\.1:\d+\/$/);
    expect(listening.readOnly).to.equal(true);
    const overview = (await (await fetch(`${listening.url}api/overview`)).json()) as { files: { dead: number } };
    expect(overview.files.dead).to.equal(1);
    const page = await (await fetch(`${listening.url}files?status=dead`)).text();
    expect(page).to.not.include('method="post"');
    const post = await fetch(`${listening.url}files/requeue`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', 'sec-fetch-site': 'same-origin' },
      body: new URLSearchParams({ one: state.deadUrl }).toString(),
    });
    expect(post.status).to.equal(403);
    const rows = (await db.ds.query(sql('SELECT status FROM file_checkpoints WHERE file_url = ?'), [state.deadUrl])) as {
      status: string;
    }[];
    expect(rows[0].status).to.equal('failed');
    child.process.kill('SIGTERM');
    expect((await child.exited).code).to.equal(0);
  });

  it('refuses a port out of range as a usage error (exit 2)', async () => {
    child = startChild('src/cli/main.ts', ['dashboard', '--db', db.url, '--port', '70000', '--json']);
    expect((await child.exited).code).to.equal(2);
  });
});
