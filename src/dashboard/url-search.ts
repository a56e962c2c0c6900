import { containsPattern, type PageContext, read } from './dashboard-sql';

/**
 * The URL search on PostgreSQL, through the trigram index of file_checkpoint_urls.
 *
 * A GIN search for every trigram of `file-0099999` reads the posting list of each, and a word
 * that most URLs contain (`file`, a bucket's name, `csv`) has a list as long as the table: at 10M
 * URLs that was 171 ms and 18,055 buffers for 1,148 candidates. The index is searched with the
 * words that few URLs contain, as the planner's statistics sample them, and the exact test
 * (`strpos`) reads only the candidates those leave.
 */

/** A word in more than this share of the sampled URLs is left to the exact test. */
const COMMON_SHARE = 0.5;
/** How long a sample is kept: ANALYZE, which makes it, runs far less often. */
const SAMPLE_MS = 60_000;
/** Shorter words give the trigram index nothing to search with (pg_trgm pads only at word edges). */
const MIN_WORD = 3;

const samples = new WeakMap<object, { at: number; urls: string[] }>();

/** The search condition on `file_url` (the URLs table) and its parameters. */
export async function urlSearch(ctx: PageContext, table: string, q: string): Promise<[string, unknown[]]> {
  const column = ctx.dialect.quote('file_url');
  const pattern = indexPattern(q, await urlSample(ctx, table));
  const like = `${column} LIKE ? ESCAPE '!'`;
  return pattern === null ? [like, [containsPattern(q)]] : [`${like} AND strpos(${column}, ?) > 0`, [pattern, q]];
}

/**
 * The pattern of the search's uncommon words, in order (`%0099999%`), when some word is common
 * in `sample`; null when the whole search should go to the index (no word is common, no sample
 * yet, or no uncommon word long enough to be searched for).
 */
export function indexPattern(q: string, sample: string[]): string | null {
  if (sample.length === 0) return null;
  const urls = sample.map((url) => url.toLowerCase());
  // pg_trgm's words: runs of letters and digits, compared without case.
  const words = q.match(/[\p{L}\p{N}]+/gu) ?? [];
  const uncommon = words.filter((word) => {
    const lower = word.toLowerCase();
    return urls.filter((url) => url.includes(lower)).length <= urls.length * COMMON_SHARE;
  });
  const searched = uncommon.filter((word) => word.length >= MIN_WORD);
  if (searched.length === 0 || uncommon.length === words.length) return null;
  return `%${searched.join('%')}%`;
}

/** The URLs sampled by ANALYZE (pg_stats' histogram bounds), read at most once a minute per DataSource. */
async function urlSample(ctx: PageContext, table: string): Promise<string[]> {
  const kept = samples.get(ctx.dataSource);
  if (kept && ctx.now - kept.at < SAMPLE_MS) return kept.urls;
  const rows = await read(ctx, (query) =>
    query<{ urls: string[] | null }>(
      'SELECT histogram_bounds::text::text[] AS urls FROM pg_stats ' +
        "WHERE schemaname = current_schema() AND tablename = ? AND attname = 'file_url'",
      [table],
    ),
  );
  const urls = rows[0]?.urls ?? [];
  samples.set(ctx.dataSource, { at: ctx.now, urls });
  return urls;
}
