/** Client `UserInput` → the model's user message. */
import { readFile } from "node:fs/promises";
import path from "node:path";
import type { ImageBlock, TextBlock, UserMessage } from "../agent/messages.js";
import type { UserInput } from "../protocol/common.js";

const IMAGE_TYPES: Record<string, string> = { ".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".gif": "image/gif", ".webp": "image/webp" };
const MAX_LOCAL_IMAGE_BYTES = 20 * 1024 * 1024;

export class UserInputError extends Error {}

export async function toUserMessage(input: UserInput[], cwd: string): Promise<UserMessage> {
  const content: Array<TextBlock | ImageBlock> = [];
  for (const part of input) {
    switch (part.type) {
      case "text":
        content.push({ type: "text", text: part.text });
        break;
      case "image":
        if (!part.url) throw new UserInputError("image inputs by fileId are not supported; send a url or a data: URL");
        content.push({ type: "image", url: part.url });
        break;
      case "localImage": {
        const file = path.resolve(cwd, part.path);
        const mime = IMAGE_TYPES[path.extname(file).toLowerCase()];
        if (!mime) throw new UserInputError(`unsupported image type: ${part.path}`);
        const data = await readFile(file).catch(() => {
          throw new UserInputError(`cannot read image: ${part.path}`);
        });
        if (data.byteLength > MAX_LOCAL_IMAGE_BYTES) throw new UserInputError(`image too large: ${part.path}`);
        content.push({ type: "image", url: `data:${mime};base64,${data.toString("base64")}` });
        break;
      }
      case "skill":
      case "mention":
        content.push({ type: "text", text: `[${part.type}: ${part.name} (${part.path})]` });
        break;
    }
  }
  return { role: "user", content };
}

/** A thread's preview: its first user text, trimmed to one short line. */
export function previewOf(input: UserInput[]): string {
  const text = input.find((p) => p.type === "text")?.text ?? "";
  const line = text.replace(/\s+/g, " ").trim();
  return line.length > 200 ? `${line.slice(0, 199)}…` : line;
}
