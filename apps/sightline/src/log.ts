/** One line per event on stderr, with the time and the part of the product that speaks. */
export function logger(app: string): (msg: string) => void {
  return (msg) => process.stderr.write(`${new Date().toISOString()} ${app} ${msg}\n`);
}
