import { readdir, readFile } from "node:fs/promises";
import { describe, expect, it } from "vitest";
import { renderJsonSchemas } from "../src/protocol/json-schema.js";

const DIR = new URL("../protocol/schema/", import.meta.url);

describe("committed JSON Schema", () => {
  it("matches what the zod source generates (run `npm run generate-schema` after changing src/protocol)", async () => {
    const expected = renderJsonSchemas();
    const committed = (await readdir(DIR)).filter((f) => f.endsWith(".json")).sort();
    expect(committed).toEqual([...expected.keys()].sort());
    for (const [name, text] of expected) {
      expect(await readFile(new URL(name, DIR), "utf8"), `protocol/schema/${name} is stale`).toBe(text);
    }
  });
});
