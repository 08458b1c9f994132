/**
 * The exact bytes of each adapter's request body, for requests that take every branch of the
 * builders (optional fields present and absent, every message and block kind). Provider prompt
 * caching depends on each request being a byte-stable prefix of the next, so a change to a body
 * builder (its typing, its key order, a field's spelling) must leave these strings unchanged.
 * The expected strings were produced by the builders as they were before they were typed with
 * the SDKs' param types (issue 29 item 3), and are compared as JSON text, key order included.
 */
import { describe, expect, it } from "vitest";
import { actualBytes } from "./request-bytes.cases.js";
import { EXPECTED_BYTES } from "./request-bytes.expected.js";

describe("request body bytes", () => {
  const actual = actualBytes();
  it("covers the same cases as the expected bytes", () => {
    expect(Object.keys(actual)).toEqual(Object.keys(EXPECTED_BYTES));
  });
  for (const name of Object.keys(EXPECTED_BYTES)) {
    it(`${name}: the body is byte for byte what it was`, () => {
      expect(actual[name]).toBe(EXPECTED_BYTES[name]);
    });
  }
});
