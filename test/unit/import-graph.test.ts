/**
 * The runtime is the ground floor: no import cycle among `lambdas/` files, and nothing under
 * `lambdas/` or `lib/` imports `cli/`, `local/` or `bench/` (what ships in a Lambda or a stack
 * must not drag in the operator tool, the local stand-ins or the benchmark). Read from the
 * TypeScript sources' own import and export-from statements, type-only ones included.
 */
import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import ts from 'typescript';

const ROOT = path.resolve(__dirname, '../..');

function sourceFiles(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    const full = path.join(dir, name);
    if (statSync(full).isDirectory()) out.push(...sourceFiles(full));
    else if (name.endsWith('.ts') && !name.endsWith('.d.ts')) out.push(full);
  }
  return out;
}

/** The repository-relative files a source file imports (relative specifiers only; packages are not files here). */
function importsOf(file: string): string[] {
  const info = ts.preProcessFile(readFileSync(file, 'utf8'), true, true);
  const out: string[] = [];
  for (const ref of info.importedFiles) {
    if (!ref.fileName.startsWith('.')) continue;
    const base = path.resolve(path.dirname(file), ref.fileName);
    const found = [base, `${base}.ts`, path.join(base, 'index.ts')].find((f) => existsSync(f) && statSync(f).isFile());
    out.push(path.relative(ROOT, found ?? base));
  }
  return out;
}

/** Every cycle's members (strongly connected components of more than one file, or a file importing itself). */
function cycles(graph: ReadonlyMap<string, readonly string[]>): string[][] {
  let index = 0;
  const indices = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (v: string): void => {
    indices.set(v, index);
    low.set(v, index);
    index += 1;
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!graph.has(w)) continue;
      if (!indices.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v) as number, low.get(w) as number));
      } else if (onStack.has(w)) {
        low.set(v, Math.min(low.get(v) as number, indices.get(w) as number));
      }
    }
    if (low.get(v) === indices.get(v)) {
      const component: string[] = [];
      for (;;) {
        const w = stack.pop() as string;
        onStack.delete(w);
        component.push(w);
        if (w === v) break;
      }
      if (component.length > 1 || (graph.get(v) ?? []).includes(v)) found.push(component.sort());
    }
  };
  for (const v of graph.keys()) if (!indices.has(v)) visit(v);
  return found;
}

describe('the cycle finder', () => {
  test.each<[string, Record<string, string[]>, string[][]]>([
    ['a chain', { a: ['b'], b: ['c'], c: [] }, []],
    ['two files importing each other', { a: ['b'], b: ['a'] }, [['a', 'b']]],
    ['a longer loop beside a clean file', { a: ['b'], b: ['c'], c: ['a'], d: ['a'] }, [['a', 'b', 'c']]],
    ['a file importing itself', { a: ['a'] }, [['a']]],
  ])('%s', (_name, graph, expected) => {
    expect(cycles(new Map(Object.entries(graph)))).toEqual(expected);
  });
});

describe('the import graph', () => {
  const runtime = sourceFiles(path.join(ROOT, 'lambdas'));
  const graph = new Map(runtime.map((f) => [path.relative(ROOT, f), importsOf(f)]));

  test('finds the runtime files and their imports', () => {
    expect(graph.size).toBeGreaterThan(40);
    expect(graph.get('lambdas/gateway/app.ts')).toContain('lambdas/gateway/admit.ts');
  });

  test('has no import cycle among lambdas/ files', () => {
    expect(cycles(graph)).toEqual([]);
  });

  test('nothing under lambdas/ or lib/ imports cli/, local/ or bench/', () => {
    const upward = [...runtime, ...sourceFiles(path.join(ROOT, 'lib'))].flatMap((f) =>
      importsOf(f)
        .filter((target) => /^(cli|local|bench)\//.test(target))
        .map((target) => `${path.relative(ROOT, f)} -> ${target}`),
    );
    expect(upward).toEqual([]);
  });
});
