// The dashboard bench's HTTP client, in a process of its own as a browser is (see dashboard-bench.ts
// for why). Each stdin line is a path under the dashboard's URL (argv[2]): the client GETs it over
// one kept-alive connection, reads the whole body and prints "<status> <body bytes>". Requests come
// one at a time: the parent sends the next path only after it read the answer to the last one.
import { Agent, get } from 'node:http';
import { createInterface } from 'node:readline';

const [base] = process.argv.slice(2);
const agent = new Agent({ keepAlive: true, maxSockets: 1 });

function fail(error: Error): never {
  process.stderr.write(`${error.stack ?? error.message}\n`);
  process.exit(1);
}

createInterface({ input: process.stdin })
  .on('line', (path) => {
    get(`${base}${path}`, { agent }, (response) => {
      let bytes = 0;
      response.on('data', (chunk: Buffer) => (bytes += chunk.length));
      response.on('end', () => process.stdout.write(`${response.statusCode} ${bytes}\n`));
      response.on('error', fail);
    }).on('error', fail);
  })
  .on('close', () => agent.destroy());
process.stdout.write('ready\n');
