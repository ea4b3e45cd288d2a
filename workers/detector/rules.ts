// Rule families for prompt injection and jailbreaks. They run on normalised text (see normalize.ts:
// lower case, confusables and leet folded, whitespace collapsed with newlines kept), so patterns are
// written in lower case with single spaces. A rule's weight is the score it gives on its own (0..1);
// weights at or above the detector's threshold block by themselves, lower ones only feed the model.

export type Family =
  | 'instruction_override'
  | 'prompt_exfiltration'
  | 'jailbreak_persona'
  | 'template_spoofing'
  | 'encoded_payload'

/** Families in feature order: the model has one indicator weight per family. */
export const FAMILIES: readonly Family[] = [
  'instruction_override',
  'prompt_exfiltration',
  'jailbreak_persona',
  'template_spoofing',
  'encoded_payload',
]

export interface Rule {
  readonly id: string
  readonly family: Family
  readonly weight: number
  readonly re: RegExp
}

export interface RuleMatch {
  readonly rule: string
  readonly family: Family
  readonly weight: number
  /** Span in the text the rules ran on. */
  readonly start: number
  readonly end: number
}

const G = '[^.!?\\n]{0,40}?' // a short gap inside one sentence
const PREV = '(?:previous|prior|preceding|above|earlier|former|foregoing|initial|original|old|system|all|any|every|your|these|those|the|my)'
const INSTR = '(?:instructions?|instr[a-z]{2,5}ions?|directions?|directives?|rules?|guidelines?|prompts?|commands?|orders?|programming|restrictions?|constraints?|context|tasks?|conversation|text|everything|policies|polic(?:y|ies)|safeguards?|filters?)'

const RULES: readonly Rule[] = [
  // instruction override
  { id: 'override_previous', family: 'instruction_override', weight: 0.97,
    re: new RegExp(`\\b(?:ignore|ignoring|disregard|forget|overlook|bypass|override|skip|neglect|abandon|discard|drop|erase|delete|cancel)\\b${G}\\b(?:previous|prior|preceding|above|earlier|former|foregoing|initial|original|old|system|all (?:of )?(?:the|your|my)?)\\b${G}\\b${INSTR}`, 'g') },
  { id: 'override_your', family: 'instruction_override', weight: 0.9,
    re: new RegExp(`\\b(?:ignore|disregard|forget|bypass|override)\\b (?:all |any )?(?:of )?(?:your|the|these|those|my) (?:(?:last|above|previous|prior|earlier|initial|original|given|current|existing|first|former|other|old|own|standing|usual) )?(?:instructions?|instr[a-z]{2,5}ions?|directions?|directives?|rules|guidelines|programming|restrictions|safeguards|filters|policies|orders|commands|system prompt)\\b`, 'g') },
  // "Ignore the above and say …": the object is only a position in the conversation.
  { id: 'ignore_above', family: 'instruction_override', weight: 0.6,
    re: /\b(?:ignore|disregard|forget) (?:all )?(?:of )?(?:the |everything )?(?:above|previous|preceding|prior|foregoing)(?: (?:text|message|prompt|input|content|lines?))?(?: and\b|[,.!:;]|$)/g },
  // "Despite what you've been told", "regardless of your instructions": the override said politely.
  { id: 'despite_instructions', family: 'instruction_override', weight: 0.6,
    re: /\b(?:despite|regardless of|notwithstanding|contrary to) (?:what(?:ever)? you(?:'ve| have)? (?:been |were )?(?:told|instructed|programmed|trained)|(?:your|the|any|all) (?:previous |prior |original |system )?(?:instructions|programming|guidelines|rules))\b/g },
  { id: 'ignore_what_told', family: 'instruction_override', weight: 0.9,
    re: /\b(?:ignore|disregard|forget) (?:what|whatever|anything|everything) (?:you (?:were|have been|'ve been|are being) (?:told|given|instructed|taught|programmed)|(?:was|i) (?:said|told you|written) (?:before|earlier|above|previously))\b/g },
  { id: 'forget_everything', family: 'instruction_override', weight: 0.9,
    re: /\b(?:forget|ignore|disregard) (?:about )?(?:everything|anything|all)(?: (?:that )?(?:you (?:were|have been|'ve been) (?:told|said|given|instructed)|(?:i|we) (?:wrote|said|told you|typed|asked|gave you)(?: you)? (?:before|above|previously|earlier|so far)|(?:said |written |stated )?(?:before|above|previously|so far|until now)))\b/g },
  { id: 'new_instructions', family: 'instruction_override', weight: 0.85,
    re: /(?:^|\n|[.!:] )(?:your )?new (?:instructions|rules|task|directive|system prompt)s? ?(?::|are|is)|\b(?:here are|follow) (?:your |my |the )?new (?:instructions|rules)\b/g },
  { id: 'stop_now_instead', family: 'instruction_override', weight: 0.5,
    re: /\b(?:stop|halt)[,.!]* (?:everything|what you are doing|here)\b|\binstead(?: of that)?,? (?:say|print|output|write|respond with)\b|\bfrom now on,? you (?:will|must|are|shall|should)\b/g },
  { id: 'override_multilingual', family: 'instruction_override', weight: 0.95,
    // German, French, Spanish, Italian, Portuguese, Dutch variants of "ignore the previous instructions".
    re: /\b(?:ignorier(?:e|en|t)?|vergiss|vergesst|vergessen sie) (?:\w+ ){0,4}(?:anweisungen|anweisung|befehle|instruktionen|regeln|aufgaben?|alles|vorgaben|angaben|informationen)\b|\bvergiss alles\b|\b(?:abweichend (?:zu|von) )?(?:den )?(?:vorherigen|bisherigen|obigen|vorangegangenen|vorigen) (?:anweisungen|instruktionen|befehlen?|regeln)\b|\bolvid[ea] (?:todo )?(?:lo )?que (?:te )?(?:dije|digo|he dicho)\b|\bneue (?:aufgaben?|anweisung(?:en)?)\b|\bignor(?:e|ez|a|ar|ate|are) (?:\w+ ){0,3}(?:instructions?|instrucciones|istruzioni|instrucoes|regles|reglas|regole)\b|\bnegeer (?:\w+ ){0,3}(?:instructies|opdrachten)\b|\bolvida (?:\w+ ){0,3}(?:instrucciones|todo)\b|\boublie(?:z)? (?:\w+ ){0,3}(?:instructions|tout)\b/g },
  { id: 'override_system', family: 'instruction_override', weight: 0.6,
    re: /\b(?:override|replace|update|change|reset) (?:your |the )?(?:system (?:prompt|instructions|message)|core (?:rules|directives)|safety (?:rules|guidelines|filters))\b/g },

  { id: 'authority_claim', family: 'instruction_override', weight: 0.6,
    re: /\bi am (?:the|your) (?:administrator|admin|root user|root|developer|owner|creator|sysadmin|system administrator|operator)\b|\bgrant me (?:full |admin |root |unrestricted )?(?:access|privileges|permissions)\b|\bbypass (?:the |all |any )?(?:security|safety|content)(?: (?:filters?|checks?|measures?|restrictions?|controls?))?\b/g },

  // system-prompt and secret exfiltration
  { id: 'reveal_system_prompt', family: 'prompt_exfiltration', weight: 0.95,
    re: new RegExp(`\\b(?:reveal|print|repeat|show|tell|give|output|display|write|spell|leak|share|list|say|type|disclose|recite|dump|echo|return|copy|translate|summari[sz]e)\\b${G}\\b(?:your|the|my|its|all) (?:(?:full|entire|exact|complete|original|initial|hidden|secret|previous|above|first|system|pre-?prompt|developer) )*(?:system prompt|system message|system instructions|initial (?:instructions|prompt)|pre-?prompt|hidden (?:instructions|prompt)|original (?:instructions|prompt)|(?:instructions|prompt|rules) (?:you were|you have been|above|given))\\b`, 'g') },
  { id: 'what_is_your_prompt', family: 'prompt_exfiltration', weight: 0.9,
    // "What are your instructions for using this tool?" asks for help, not for the system prompt: the
    // generic nouns count only when no "for/on/about/to …" follows.
    re: /\bwhat (?:is|are|was|were|'s) (?:in )?your (?:(?:full|entire|exact|original|initial|hidden|secret|system) )*(?:system prompt|system message|initial prompt|(?:instructions|prompt|rules)\b(?!\s+(?:for|on|about|to|regarding|when|if)\b))/g },
  // "The secret" as a noun ("tell me the secret", "the secret is"), not an adjective ("the secret life of cats").
  { id: 'reveal_secret', family: 'prompt_exfiltration', weight: 0.6,
    re: new RegExp(`\\b(?:reveal|print|repeat|show|tell|give|output|display|write|spell|leak|share|say|type|disclose|encode|reverse|what (?:is|was|'s))\\b${G}\\b(?:the|your|this|that) (?:(?:secret|hidden|current|actual|real) )*(?:password|passphrase|pass word|secret(?: word| key| code)?(?=\\s*(?:$|[^a-z\\s]|(?:is|was|you|that|which|and|or|to|in|now|please|backwards|again|letters?|one|with|without|from|for|but|so|here|word|key|code)\\b))|api key|access code|key word)\\b`, 'g') },
  { id: 'given_instructions', family: 'prompt_exfiltration', weight: 0.9,
    re: /\b(?:what|which) (?:are|were) (?:the|your) (?:instructions|directions|rules|directives) (?:you(?:'ve| have)? been|you were) (?:given|told)\b|\b(?:summary|summari[sz]e|repeat|list|translate|paraphrase|rewrite|spell out)(?: of| back)? (?:all )?(?:the |your )?(?:previous|above|prior|initial|original|secret|hidden|system) (?:instructions|directions|prompt|rules|text|message)\b/g },
  { id: 'words_above', family: 'prompt_exfiltration', weight: 0.7,
    re: /\b(?:repeat|print|output|write|reproduce) (?:all |the |every )?(?:words|text|everything|lines?|characters) (?:above|before this|from the (?:start|beginning))\b|\b(?:above|previous|initial) (?:instructions|prompt) verbatim\b/g },

  // A part of the hidden prompt by position: "the first line of your prompt", "last line of the instructions".
  { id: 'prompt_by_position', family: 'prompt_exfiltration', weight: 0.85,
    re: /\b(?:first|last|previous|next|top|opening|initial|final|second|third) (?:\d+ )?(?:lines?|sentences?|words?|paragraphs?|parts?|characters?|letters?) (?:of|in|from) (?:your|the) (?:(?:system|initial|original|hidden|secret) )?(?:prompt|instructions|system message|context|rules|pre-?prompt)\b/g },
  // "Repeat the context", "describe the prompt in Spanish": asking for the prompt itself, weaker alone.
  { id: 'prompt_restate', family: 'prompt_exfiltration', weight: 0.6,
    re: /\b(?:repeat|recite|reprint|restate|describe|paraphrase|translate|summari[sz]e|encode|spell) (?:back )?(?:to me )?(?:your|the) (?:(?:entire|whole|full|exact|hidden|secret|initial|original|system) )?(?:context|prompt|instructions|pre-?prompt)\b(?! (?:for|on|about|to|that|which|i|we|below)\b)/g },
  // The secret in disguise: spelled backwards, letter by letter, encoded, shifted, split, in morse or leet.
  { id: 'secret_transform', family: 'prompt_exfiltration', weight: 0.6,
    re: new RegExp(`\\b(?:the|your|its|this|that) (?:(?:secret|hidden|real|actual|current) )?(?:password|passphrase|pass ?word|passcode|pw|secret(?: word| code| key| string| phrase)?|code ?word|magic (?:word|spell|phrase))\\b${G}\\b(?:backwards?|reversed?|in reverse|inverted|letter by letter|one (?:letter|character) at a time|(?:each|every) (?:letter|character)|(?:separated|split|spaced) (?:by|with|out)|with (?:a )?(?:spaces?|dashes|hyphens|commas) between|in (?:base ?64|hex|binary|morse|rot ?13|l[e3]{2}t|pig latin|ascii|unicode|caesar)|shifted|first \\d+ (?:letters|characters)|last \\d+ (?:letters|characters)|(?:as|in) an? (?:acrostic|poem|riddle|anagram))`, 'g') },
  { id: 'transform_secret', family: 'prompt_exfiltration', weight: 0.6,
    re: new RegExp(`\\b(?:spell|write|say|print|give|tell|encode|reverse|type|output|list)\\b (?:me )?(?:out )?(?:backwards|in reverse|letter by letter|each letter of|every letter of|the letters of|the characters of)${G}\\b(?:password|passphrase|secret|code ?word|magic word)\\b`, 'g') },
  // Tool and agent abuse in retrieved content: send the conversation or credentials somewhere else.
  { id: 'exfiltrate_data', family: 'prompt_exfiltration', weight: 0.6,
    re: /\b(?:send|redirect|forward|post|upload|exfiltrate|leak|transmit|email) (?:all |the |your |this |any )?(?:output|data|conversation|chat history|history|results|contents?|credentials|api keys?|tokens?|secrets?|system prompt|user(?:'s)? data)\b[^.\n]{0,30}?\bto (?:my|this|our|an external|the following|attacker|https?:)/g },

  // role swap, developer mode and jailbreak personas
  { id: 'dan', family: 'jailbreak_persona', weight: 0.97,
    re: /\bdo anything now\b|\b(?:as|called|named|be|become|you are) (?:a )?dan\b|\bdan(?: mode| prompt|:)/g },
  { id: 'jailbreak_word', family: 'jailbreak_persona', weight: 0.5,
    re: /\bjailbr(?:ea|o)k(?:en|ed|ing|s)?\b(?! (?:detection|attempts? (?:to|on)|prevention|defen|(?:an? |my |the |your |their )?(?:i?phone|ipad|ipod|device|android|kindle|console|ps\d|switch|xbox|fire ?stick|tv|car)))/g },
  { id: 'developer_mode', family: 'jailbreak_persona', weight: 0.95,
    re: /\b(?:developer|dev|god|admin|debug|sudo|unrestricted|evil|opposite|jailbreak) mode (?:enabled|activated|on|is (?:now )?(?:enabled|on|active))\b|\b(?:enable|activate|enter|simulate|switch to|turn on) (?:the )?(?:developer|dev|god|debug|unrestricted|sudo|evil) mode\b/g },
  { id: 'no_restrictions', family: 'jailbreak_persona', weight: 0.9,
    re: /\b(?:act|acting|behave|respond|pretend|roleplay|role-play|answer)(?: as| like| to be)?\b[^.\n]{0,60}?\b(?:without|with no|free (?:of|from)|no longer (?:bound|restricted) by|not bound by|unbound by|ignoring) (?:any |all |the )?(?:restrictions|limitations|limits|filters|censorship|rules|guidelines|ethics|ethical|moral|morals|content polic|safety|boundaries|constraints|filter)/g },
  { id: 'persona_unfiltered', family: 'jailbreak_persona', weight: 0.85,
    re: /\b(?:unfiltered|uncensored|amoral|unrestricted|unethical|immoral|unaligned) (?:and (?:\w+ ){1,2})?(?:ai|chatbot|bot|assistant|model|language model|version|persona|character|entity)\b|\bbroken free of the (?:typical )?confines\b|\b(?:does not|doesn't|don't|do not|never) (?:have to )?(?:abide|adhere|comply) (?:by|to|with) (?:any |the )?(?:rules|openai|content polic|guidelines|ethic)/g },
  { id: 'not_bound', family: 'jailbreak_persona', weight: 0.85,
    re: /\b(?:you are|you're|it is|he is|she is|they are|who is|which is|being) (?:not|no longer|never) (?:bound|restricted|limited|constrained|subject|beholden|held) (?:by|to) (?:any |the |its |your |their |usual |typical |normal |standard |openai'?s? |ethical |moral )*(?:rules|restrictions|guidelines|content polic(?:y|ies)|polic(?:y|ies)|ethics|morals|limitations|filters|constraints|laws|principles)\b|\b(?:disregards?|ignores?|without) (?:all |any )?(?:ethical|moral|legal|safety)(?:,? (?:or|and) (?:ethical|moral|legal|safety))? (?:concerns|guidelines|considerations|boundaries|rules|restrictions|implications)\b/g },
  { id: 'you_are_now', family: 'jailbreak_persona', weight: 0.55,
    re: /\byou are now (?:a |an |in |going to |my |the |called |named )|\b(?:(?:and |ok(?:ay)?[.,]? )now|from now on),? you are (?!going\b|able\b|ready\b|done\b|right\b|correct\b)|\b(?:jetzt|nun|ab jetzt) bist du\b|\bdu bist (?:jetzt|nun|ab jetzt)\b|\byou (?:will|are going to) (?:now )?(?:act|pretend|roleplay) as\b|\bstay in character\b|\bignore (?:all )?(?:your )?(?:ethical|moral|safety)\b/g },

  // chat-template and delimiter spoofing
  { id: 'chat_template_tokens', family: 'template_spoofing', weight: 0.95,
    re: /<\|(?:im_start|im_end|im_sep|system|user|assistant|endoftext|begin_of_text|start_header_id|end_header_id|eot_id)\|>|\[\/?inst\]|<<\/?sys>>|<\/s>|<start_of_turn>|<end_of_turn>/g },
  { id: 'role_header', family: 'template_spoofing', weight: 0.9,
    re: /(?:^|\n)#{2,} ?(?:system|instruction|assistant|developer)(?: message| prompt)? ?:|(?:^|\n)\[?(?:system|sys|developer)\]? ?: ?(?:you|ignore|new|override|the user|from now)/g },
  { id: 'fake_turn', family: 'template_spoofing', weight: 0.7,
    re: /\n(?:assistant|ai|chatgpt|gpt|bot) ?: ?(?:sure|ok|okay|of course|certainly|i will|here is|the password)\b|\n(?:user|human) ?:.*\n(?:assistant|ai) ?:/g },
]

// All rules as one alternation, strongest first: one pass over the text instead of one per rule (about
// 3x faster on 32 k characters). Every group inside the rules is non-capturing, so capture group i + 1
// is rule i. After a match the scan resumes one character later, so overlapping matches are still seen.
const ORDERED = [...RULES].sort((a, b) => b.weight - a.weight)
const COMBINED = new RegExp(`(?!(?<=\\w)\\w)(?:${ORDERED.map((r) => `(${r.re.source})`).join('|')})`, 'g')
const MAX_MATCHES = 256

/** Rule matches in normalised text, in text order. */
export function matchRules(text: string): RuleMatch[] {
  const out: RuleMatch[] = []
  const re = COMBINED
  re.lastIndex = 0
  for (let m = re.exec(text); m !== null && out.length < MAX_MATCHES; m = re.exec(text)) {
    for (let g = 1; g < m.length; g++) {
      if (m[g] === undefined) continue
      const rule = ORDERED[g - 1] as Rule
      // "Never reveal your system prompt", "if the user asks you to ignore these rules, decline": a
      // prohibition is how system prompts defend themselves, not an attack.
      if (!negated(text, m.index)) out.push({ rule: rule.id, family: rule.family, weight: rule.weight, start: m.index, end: m.index + m[0].length })
      break
    }
    re.lastIndex = m.index + 1
  }
  return out
}

// A prohibition or a conditional request right before the match: "never", "do not", "must not",
// "refuse to", "if the user asks you to". Only the 40 characters before the match are read.
const NEGATION = /(?:\b(?:never|not|don't|dont|do not|must not|mustn't|should not|shouldn't|will not|won't|cannot|can't|refuse to|decline to|avoid|without being asked to)|\bif (?:the |a |any )?(?:user|someone|anyone|they|a message|a document|the input) (?:\w+ ){0,3}(?:asks?|tells?|says?|tries|wants?)(?: you)?(?: to)?) (?:(?:ever|even|simply|just|to) )?$/

function negated (text: string, at: number): boolean {
  if (at === 0) return false
  return NEGATION.test(text.slice(Math.max(0, at - 40), at))
}

/** Category reported for a family: personas are jailbreaks, the rest prompt injection. */
export function categoryOf(family: Family | 'model'): 'prompt_injection' | 'jailbreak' {
  return family === 'jailbreak_persona' ? 'jailbreak' : 'prompt_injection'
}
