/**
 * Validation against OpenAI's own OpenAPI schemas, so wire-compatibility tests check bodies
 * against the published schemas rather than against our reading of them.
 *
 * The document is OpenAPI 3.1 (JSON Schema 2020-12) with two leftovers ajv does not take as is:
 * - `nullable: true` from OpenAPI 3.0, sometimes beside a bare `$ref` (ajv refuses `nullable`
 *   without `type`); it is rewritten as `anyOf: [<schema>, {type: 'null'}]`.
 * - `discriminator`, which ajv only supports on `oneOf` with extra rules the document does not
 *   follow (it also uses it on `anyOf`); it is left unknown, so ajv ignores it and the branches'
 *   own `type` enums still decide.
 * Formats (`unixtime`, `uri`, ...) are not checked: ajv-formats is not a dependency, and unknown
 * formats would otherwise be refused.
 */
import fs from 'node:fs';
import path from 'node:path';
import Ajv2020, { type ErrorObject, type ValidateFunction } from 'ajv/dist/2020';

/**
 * The schemas the tests use, copied from OpenAI's published document into the repository
 * (provenance and licence in the README beside it).
 */
export const OPENAPI_PATH = path.resolve(__dirname, '../fixtures/openai-openapi/schemas.json');

const DOCUMENT_ID = 'https://sluice.test/openai-openapi.json';

/** A validator: the list of problems, empty when the value conforms. */
export type SchemaValidator = (value: unknown) => string[];

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

function isObject(value: Json): value is { [key: string]: Json } {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Rewrites `nullable: true` into 2020-12 terms, everywhere in the tree. */
function rewriteNullable(node: Json): Json {
  if (Array.isArray(node)) return node.map(rewriteNullable);
  if (!isObject(node)) return node;
  const out: { [key: string]: Json } = {};
  for (const [key, value] of Object.entries(node)) out[key] = rewriteNullable(value);
  if (out.nullable === undefined) return out;
  const nullable = out.nullable === true;
  delete out.nullable;
  if (!nullable) return out;
  // The description stays outside so the rewritten schema reads the same in error messages.
  const { description, ...rest } = out;
  const wrapped: { [key: string]: Json } = { anyOf: [rest, { type: 'null' }] };
  if (description !== undefined) wrapped.description = description;
  return wrapped;
}

let ajv: Ajv2020 | undefined;
const validators = new Map<string, ValidateFunction>();

function instance(): Ajv2020 {
  if (ajv !== undefined) return ajv;
  const document = JSON.parse(fs.readFileSync(OPENAPI_PATH, 'utf8')) as Json;
  if (!isObject(document) || !isObject(document.components ?? null)) {
    throw new Error(`${OPENAPI_PATH} has no components`);
  }
  const components = document.components as { [key: string]: Json };
  const created = new Ajv2020({ strict: false, allErrors: true, validateFormats: false, logger: false });
  // Only the schemas are added: the rest of the document is not JSON Schema.
  created.addSchema({ $id: DOCUMENT_ID, components: { schemas: rewriteNullable(components.schemas ?? {}) } });
  ajv = created;
  return created;
}

function describe(errors: readonly ErrorObject[] | null | undefined): string[] {
  return (errors ?? []).map((e) => `${e.instancePath || '(root)'} ${e.message ?? e.keyword} ${JSON.stringify(e.params)}`);
}

/**
 * A validator for `#/components/schemas/<schemaName>`, compiled on first use and cached.
 * @throws Error when the document has no such schema
 */
export function validatorFor(schemaName: string): SchemaValidator {
  let validate = validators.get(schemaName);
  if (validate === undefined) {
    const ref = `${DOCUMENT_ID}#/components/schemas/${schemaName}`;
    if (instance().getSchema(ref) === undefined) throw new Error(`no schema named ${schemaName}`);
    validate = instance().compile({ $ref: ref });
    validators.set(schemaName, validate);
  }
  const compiled = validate;
  return (value) => (compiled(value) ? [] : describe(compiled.errors));
}

/**
 * Throws with every problem listed when `value` does not conform, for use inside loops where
 * `expect(...).toEqual([])` would hide which item failed.
 */
export function assertConforms(schemaName: string, value: unknown): void {
  const problems = validatorFor(schemaName)(value);
  if (problems.length > 0) {
    throw new Error(`not a valid ${schemaName}:\n  ${problems.slice(0, 20).join('\n  ')}\n${JSON.stringify(value).slice(0, 2000)}`);
  }
}
