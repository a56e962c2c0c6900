import { type Html, html } from './html';

/**
 * Completed files per minute over the last hour, oldest bucket first.
 * @inline
 */
export interface Throughput {
  /** The width of one bucket, in milliseconds. */
  bucketMs: number;
  /** Start of the first bucket (ms since the epoch). */
  from: number;
  /** Files completed in each bucket, oldest first. */
  completed: number[];
}

const WIDTH = 600;
const HEIGHT = 120;
const AXIS = 16;

/** The chart as inline SVG drawn on the server (attributes only: no inline style, so a strict CSP allows it). */
export function throughputChart(throughput: Throughput): Html {
  const max = Math.max(1, ...throughput.completed);
  const slot = WIDTH / throughput.completed.length;
  const plot = HEIGHT - AXIS;
  const total = throughput.completed.reduce((sum, n) => sum + n, 0);
  const bars = throughput.completed.map((n, i) => {
    if (n === 0) return '';
    const height = Math.max(1, Math.round((n / max) * (plot - 4)));
    const minutesAgo = throughput.completed.length - i;
    return html`<rect class="bar" x="${(i * slot + 1).toFixed(1)}" y="${plot - height}" width="${(slot - 2).toFixed(1)}" height="${height}"><title>${n} completed, ${minutesAgo} min ago</title></rect>`;
  });
  return html`<figure class="chart"><svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ${WIDTH} ${HEIGHT}" width="${WIDTH}" height="${HEIGHT}" role="img" aria-label="Files completed per minute over the last hour: ${total} in total">
<line class="axis" x1="0" y1="${plot}" x2="${WIDTH}" y2="${plot}"/>
${bars}
<text class="label" x="0" y="${HEIGHT - 3}">&#8722;60 min</text>
<text class="label" x="${WIDTH}" y="${HEIGHT - 3}" text-anchor="end">now</text>
<text class="label" x="2" y="11">max ${max}/min</text>
</svg><figcaption>Files completed per minute, last hour: ${total}</figcaption></figure>`;
}
