/** Renders rows as left-aligned columns under a header, two spaces apart. */
export function textTable(header: string[], rows: string[][]): string[] {
  const widths = header.map((title, column) => Math.max(title.length, ...rows.map((row) => row[column].length)));
  const render = (cells: string[]): string =>
    cells
      .map((cell, column) => (column === cells.length - 1 ? cell : cell.padEnd(widths[column])))
      .join('  ')
      .trimEnd();
  return [render(header), ...rows.map(render)];
}

/** A time in ms since the epoch as ISO 8601, or "-". */
export function formatTime(ms: number | null): string {
  return ms === null ? '-' : new Date(ms).toISOString();
}
