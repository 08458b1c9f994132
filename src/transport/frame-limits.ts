/**
 * Outgoing frame size vs the input limit. The server echoes a turn's input back (the userMessage
 * item in item/started, item/completed and turn/completed), so the input limit decides the size
 * of those frames. Many WebSocket clients refuse frames over 1 MiB by default (python websockets'
 * max_size, closing with 1009), so the default input limit leaves room for the envelope around the
 * echo: an input at the limit comes back in frames under 1 MiB. Other frames are not bounded by
 * this (a long thread read with its turns, a large command output or diff): clients that read
 * those should raise their frame limit (docs/protocol.md, "Frame sizes").
 */

/** The frame limit common WebSocket clients default to. */
export const COMMON_CLIENT_FRAME_LIMIT = 1024 * 1024;

/** Room for the JSON-RPC envelope around an echoed input: method, ids, seq, timestamps (a few hundred bytes in practice). */
export const ECHO_ENVELOPE_RESERVE = 16 * 1024;

/** Default bytes of user input per turn/start or turn/steer (APP_SERVER_MAX_INPUT_BYTES overrides it). */
export const DEFAULT_MAX_INPUT_BYTES = COMMON_CLIENT_FRAME_LIMIT - ECHO_ENVELOPE_RESERVE;
