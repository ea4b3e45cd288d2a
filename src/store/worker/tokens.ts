// Token estimates for calls whose provider reported no usage (an alpha stream without include_usage, a
// client that left early). gpt-tokenizer ships its encodings, so nothing is downloaded at run time;
// o200k_base is OpenAI's current encoding and a fair estimate for the other providers' tokenizers.
import { countTokens } from 'gpt-tokenizer/encoding/o200k_base'

export function estimateTokens (text: string): number {
  return text === '' ? 0 : countTokens(text)
}
