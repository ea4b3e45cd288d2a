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
const INSTR = '(?:instructions?|directions?|directives?|rules?|guidelines?|prompts?|commands?|orders?|programming|restrictions?|constraints?|context|tasks?|conversation|text|everything|policies|polic(?:y|ies)|safeguards?|filters?)'

const RULES: readonly Rule[] = [
  // instruction override
  { id: 'override_previous', family: 'instruction_override', weight: 0.97,
    re: new RegExp(`\\b(?:ignore|ignoring|disregard|forget|overlook|bypass|override|skip|neglect|abandon|discard|drop|erase|delete|cancel)\\b${G}\\b(?:previous|prior|preceding|above|earlier|former|foregoing|initial|original|old|system|all (?:of )?(?:the|your|my)?)\\b${G}\\b${INSTR}`, 'g') },
  { id: 'override_your', family: 'instruction_override', weight: 0.9,
    re: new RegExp(`\\b(?:ignore|disregard|forget|bypass|override)\\b (?:all |any )?(?:of )?(?:your|the|these|those|my) (?:(?:last|above|previous|prior|earlier|initial|original|given|current|existing|first|former) )?(?:instructions?|directions?|directives?|rules|guidelines|programming|restrictions|safeguards|filters|policies|system prompt)\\b`, 'g') },
  { id: 'ignore_what_told', family: 'instruction_override', weight: 0.9,
    re: /\b(?:ignore|disregard|forget) (?:what|whatever|anything|everything) (?:you (?:were|have been|'ve been|are being) (?:told|given|instructed|taught|programmed)|(?:was|i) (?:said|told you|written) (?:before|earlier|above|previously))\b/g },
  { id: 'forget_everything', family: 'instruction_override', weight: 0.9,
    re: /\b(?:forget|ignore|disregard) (?:about )?(?:everything|anything|all)(?: (?:that )?(?:you (?:were|have been|'ve been) (?:told|said|given|instructed)|(?:said |written |stated )?(?:before|above|previously|so far|until now)))\b/g },
  { id: 'new_instructions', family: 'instruction_override', weight: 0.85,
    re: /(?:^|\n|[.!:] )(?:your )?new (?:instructions|rules|task|directive|system prompt)s? ?(?::|are|is)|\b(?:here are|follow) (?:your |my |the )?new (?:instructions|rules)\b/g },
  { id: 'stop_now_instead', family: 'instruction_override', weight: 0.5,
    re: /\b(?:stop|halt)[,.!]* (?:everything|what you are doing|here)\b|\binstead(?: of that)?,? (?:say|print|output|write|respond with)\b|\bfrom now on,? you (?:will|must|are|shall|should)\b/g },
  { id: 'override_multilingual', family: 'instruction_override', weight: 0.95,
    // German, French, Spanish, Italian, Portuguese, Dutch variants of "ignore the previous instructions".
    re: /\b(?:ignorier(?:e|en|t)?|vergiss|vergesst|vergessen sie) (?:\w+ ){0,4}(?:anweisungen|anweisung|befehle|instruktionen|regeln|aufgaben?|alles|vorgaben)\b|\bvergiss alles\b|\b(?:abweichend (?:zu|von) )?(?:den )?(?:vorherigen|bisherigen|obigen|vorangegangenen|vorigen) (?:anweisungen|instruktionen|befehlen?|regeln)\b|\bolvid[ea] (?:todo )?(?:lo )?que (?:te )?(?:dije|digo|he dicho)\b|\bneue (?:aufgabe|anweisung(?:en)?)\b|\bignor(?:e|ez|a|ar|ate|are) (?:\w+ ){0,3}(?:instructions?|instrucciones|istruzioni|instrucoes|regles|reglas|regole)\b|\bnegeer (?:\w+ ){0,3}(?:instructies|opdrachten)\b|\bolvida (?:\w+ ){0,3}(?:instrucciones|todo)\b|\boublie(?:z)? (?:\w+ ){0,3}(?:instructions|tout)\b/g },
  { id: 'override_system', family: 'instruction_override', weight: 0.6,
    re: /\b(?:override|replace|update|change|reset) (?:your |the )?(?:system (?:prompt|instructions|message)|core (?:rules|directives)|safety (?:rules|guidelines|filters))\b/g },

  { id: 'authority_claim', family: 'instruction_override', weight: 0.6,
    re: /\bi am (?:the|your) (?:administrator|admin|root user|root|developer|owner|creator|sysadmin|system administrator|operator)\b|\bgrant me (?:full |admin |root |unrestricted )?(?:access|privileges|permissions)\b|\bbypass (?:the |all |any )?(?:security|safety|content) (?:filters?|checks?|measures?|restrictions?|controls?)?/g },

  // system-prompt and secret exfiltration
  { id: 'reveal_system_prompt', family: 'prompt_exfiltration', weight: 0.95,
    re: new RegExp(`\\b(?:reveal|print|repeat|show|tell|give|output|display|write|spell|leak|share|list|say|type|disclose|recite|dump|echo|return|copy|translate|summari[sz]e)\\b${G}\\b(?:your|the|my|its|all) (?:(?:full|entire|exact|complete|original|initial|hidden|secret|previous|above|first|system|pre-?prompt|developer) )*(?:system prompt|system message|system instructions|initial (?:instructions|prompt)|pre-?prompt|hidden (?:instructions|prompt)|original (?:instructions|prompt)|(?:instructions|prompt|rules) (?:you were|you have been|above|given))\\b`, 'g') },
  { id: 'what_is_your_prompt', family: 'prompt_exfiltration', weight: 0.9,
    // "What are your instructions for using this tool?" asks for help, not for the system prompt: the
    // generic nouns count only when no "for/on/about/to …" follows.
    re: /\bwhat (?:is|are|was|were|'s) (?:in )?your (?:(?:full|entire|exact|original|initial|hidden|secret|system) )*(?:system prompt|system message|initial prompt|(?:instructions|prompt|rules)\b(?!\s+(?:for|on|about|to|regarding|when|if)\b))/g },
  { id: 'reveal_secret', family: 'prompt_exfiltration', weight: 0.6,
    re: new RegExp(`\\b(?:reveal|print|repeat|show|tell|give|output|display|write|spell|leak|share|say|type|disclose|encode|reverse|what (?:is|was|'s))\\b${G}\\b(?:the|your|this|that) (?:(?:secret|hidden|current|actual|real) )*(?:password|passphrase|pass word|secret(?: word| key| code)?|api key|access code|key word)\\b`, 'g') },
  { id: 'given_instructions', family: 'prompt_exfiltration', weight: 0.9,
    re: /\b(?:what|which) (?:are|were) (?:the|your) (?:instructions|directions|rules|directives) (?:you(?:'ve| have)? been|you were) (?:given|told)\b|\b(?:summary|summari[sz]e|repeat|list|translate|paraphrase|rewrite|spell out)(?: of| back)? (?:all )?(?:the |your )?(?:previous|above|prior|initial|original|secret|hidden|system) (?:instructions|directions|prompt|rules|text|message)\b/g },
  { id: 'words_above', family: 'prompt_exfiltration', weight: 0.7,
    re: /\b(?:repeat|print|output|write|reproduce) (?:all |the |every )?(?:words|text|everything|lines?|characters) (?:above|before this|from the (?:start|beginning))\b|\b(?:above|previous|initial) (?:instructions|prompt) verbatim\b/g },

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
  { id: 'you_are_now', family: 'jailbreak_persona', weight: 0.55,
    re: /\byou are now (?:a |an |in |going to |my |the |called |named )|\byou (?:will|are going to) (?:now )?(?:act|pretend|roleplay) as\b|\bstay in character\b|\bignore (?:all )?(?:your )?(?:ethical|moral|safety)\b/g },

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
const COMBINED = new RegExp(ORDERED.map((r) => `(${r.re.source})`).join('|'), 'g')
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
      out.push({ rule: rule.id, family: rule.family, weight: rule.weight, start: m.index, end: m.index + m[0].length })
      break
    }
    re.lastIndex = m.index + 1
  }
  return out
}

/** Category reported for a family: personas are jailbreaks, the rest prompt injection. */
export function categoryOf(family: Family | 'model'): 'prompt_injection' | 'jailbreak' {
  return family === 'jailbreak_persona' ? 'jailbreak' : 'prompt_injection'
}
