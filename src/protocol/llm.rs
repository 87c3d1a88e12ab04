//! What providers see: the SDK generation they imitate (headers, betas, body fields, error wording, usage formulas) and the built-in model catalog.

/// What providers see: the SDK generation they imitate (headers, betas, body fields, error wording, usage formulas) and the built-in model catalog.
#[derive(Debug)]
pub struct Llm {
    /// The generation of pi's provider SDKs (`@anthropic-ai/sdk`, `openai`, `@google/genai`,
    /// `@mistralai/mistralai`, the AWS SDK) and of pi-ai's provider code whose wire details pith
    /// imitates. Each API turns it into its own dialect once per request. 0.73.1: `Pi073`;
    /// 0.87.1: `Pi087`; 1.6.0: `Pi16`.
    pub sdk: SdkGeneration,
    /// The built-in model catalog (`models.generated.ts` of the pi release). 0.73.1: `V073`;
    /// 0.87.1: `V087`.
    pub catalog: Catalog,
    /// `--provider` without `--model` stops the start with `Error: --provider requires --model
    /// (for example: --provider <name> --model <pattern>)`, exit 1. 0.73.1: false; 0.87.1: false
    /// (the provider's first model); 1.6.0: true.
    pub provider_requires_model: bool,
    /// A finished tool call whose complete arguments text is not a JSON object is not run: the
    /// call carries `argumentsError` (V8's `JSON.parse` message and the text) and `arguments: {}`,
    /// and its result is `Invalid arguments for tool "<name>": <argumentsError>`.
    /// 0.73.1: false; 0.87.1: false (the prefix that parses, run); 1.6.0: true.
    pub tool_arguments_error: bool,
}

/// The generation of pi's provider SDKs whose wire details (headers and user agents, beta flags,
/// body fields, error wording, usage and cost formulas, environment variables) pith imitates.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SdkGeneration {
    /// pi 0.73.1's.
    #[default]
    Pi073,
    /// pi 0.87.1's (`@anthropic-ai/sdk` 0.124.0, `openai` 6.40.0, Stainless platform headers).
    Pi087,
    /// pi 1.6.0's: 0.87.1's wire details with `@anthropic-ai/sdk` 0.129.0, `openai` 7.59.0 and
    /// the identity `User-Agent` `pi/1.6.0 (<platform>; node/<version>; <arch>)`.
    Pi16,
}

impl SdkGeneration {
    /// Another model's readable thinking is left out of a request (pi 1.6.0's "clean model
    /// switching"); else it is sent as text (0.73.1, 0.87.1).
    pub const fn drops_foreign_thinking(self) -> bool {
        matches!(self, SdkGeneration::Pi16)
    }

    /// The identity `User-Agent` names pi-ai's version and node's (`pi/1.6.0 (linux;
    /// node/v22.23.3; x64)`, 1.6.0) instead of the kernel release (`pi (linux <release>; x64)`).
    pub const fn versioned_user_agent(self) -> bool {
        matches!(self, SdkGeneration::Pi16)
    }

    /// A computed cost says it is not the provider's (`usage.cost.totalFromProvider: false`,
    /// pi-ai 1.5.0), set whenever the provider's usage arrives.
    pub const fn marks_cost_source(self) -> bool {
        matches!(self, SdkGeneration::Pi16)
    }

    /// A transport failure's message ends with its cause, as pi-ai 1.6.0's `withCauseDetail`
    /// writes it (`Connection error.: connect ECONNREFUSED 127.0.0.1:8080`, `terminated: other
    /// side closed (UND_ERR_SOCKET)`); before, the SDK's message alone.
    pub const fn error_causes(self) -> bool {
        matches!(self, SdkGeneration::Pi16)
    }

    /// The transcript carries system messages (0.87.1's `normalizeContext`); 0.73.1 reads only
    /// the system prompt.
    pub const fn reads_system_messages(self) -> bool {
        !matches!(self, SdkGeneration::Pi073)
    }

    /// Costs use the model's price tiers (`cost.tiers`, pi-ai 0.87.1's `calculateCost`);
    /// 0.73.1 has flat prices only.
    pub const fn tiered_prices(self) -> bool {
        !matches!(self, SdkGeneration::Pi073)
    }

    /// A request without `maxTokens` asks for the model's own output limit clamped to what the
    /// context window leaves (0.87.1); 0.73.1 caps the model's limit at 32,000.
    pub const fn max_tokens_from_window(self) -> bool {
        !matches!(self, SdkGeneration::Pi073)
    }

    /// Mistral goes through pi's own `fetch` client (its headers, body, error texts, stream
    /// decoding; 0.87.1) instead of the Mistral SDK (0.73.1).
    pub const fn mistral_own_fetch(self) -> bool {
        !matches!(self, SdkGeneration::Pi073)
    }

    /// Which environment variables hold a provider's key.
    pub const fn env_key_names(self) -> EnvKeyNames {
        match self {
            SdkGeneration::Pi073 => EnvKeyNames::Base,
            SdkGeneration::Pi087 => EnvKeyNames::Extended,
            SdkGeneration::Pi16 => EnvKeyNames::PerPlan,
        }
    }
}

/// The environment variables pi-ai's `getEnvApiKey` reads, by generation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EnvKeyNames {
    /// pi-ai 0.73.1's table.
    Base,
    /// 0.87.1's: the providers it added (`NVIDIA_API_KEY`, `TOGETHER_API_KEY`, …).
    Extended,
    /// 1.6.0's: the token plans' own variables, `azure`'s name.
    PerPlan,
}

/// A built-in model catalog (the generated model tables of one pi release).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Catalog {
    /// pi 0.73.1's `models.generated.ts`.
    #[default]
    V073,
    /// pi 0.87.1's (other models, prices with tiers, `promptCache`, `inputLimits`).
    V087,
    /// pi 1.6.0's (every model `"type":"chat"`; `azure-openai-responses` renamed `azure`).
    V16,
}
