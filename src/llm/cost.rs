//! Usage cost, computed exactly like the reference's `calculateCost`: each component is
//! `price_per_million / 1e6 * tokens` in IEEE doubles, in that operation order, and the total is
//! their sum in the order input, output, cacheRead, cacheWrite (so the printed floats match).

use crate::llm::ModelCost;
use crate::message::{Cost, Usage};

pub fn calculate(prices: &ModelCost, usage: &Usage) -> Cost {
    let input = prices.input / 1_000_000.0 * usage.input as f64;
    let output = prices.output / 1_000_000.0 * usage.output as f64;
    let cache_read = prices.cache_read / 1_000_000.0 * usage.cache_read as f64;
    let cache_write = prices.cache_write / 1_000_000.0 * usage.cache_write as f64;
    Cost {
        input,
        output,
        cache_read,
        cache_write,
        total: input + output + cache_read + cache_write,
        total_from_provider: None,
    }
}

/// Recompute `usage.cost` in place.
pub fn apply(prices: &ModelCost, usage: &mut Usage) {
    usage.cost = calculate(prices, usage);
}

/// pi 0.87.1's `calculateCost`: cache writes priced as `(cacheWrite · short + input · 2 · 1h) /
/// 1e6` (1-hour writes cost twice the input price; the operation order changes the floats).
/// With tiered prices (`cost.tiers`), the rates are those of the highest tier whose threshold
/// the request's input tokens (input + cache reads + cache writes) exceed.
pub fn calculate_tiered(prices: &ModelCost, usage: &Usage) -> Cost {
    let long = usage.cache_write_1h.unwrap_or(0).min(usage.cache_write);
    let short = usage.cache_write - long;
    let (p_in, p_out, p_read, p_write) =
        prices.rates_for(usage.input + usage.cache_read + usage.cache_write);
    let input = p_in / 1_000_000.0 * usage.input as f64;
    let output = p_out / 1_000_000.0 * usage.output as f64;
    let cache_read = p_read / 1_000_000.0 * usage.cache_read as f64;
    let cache_write = (p_write * short as f64 + p_in * 2.0 * long as f64) / 1_000_000.0;
    Cost {
        input,
        output,
        cache_read,
        cache_write,
        total: input + output + cache_read + cache_write,
        total_from_provider: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_reference_floats() {
        // Values from the oracle transcripts (fake model priced 3 / 15, fake-oai 2 / 8).
        let p = ModelCost {
            input: 3.0,
            output: 15.0,
            cache_read: 0.3,
            cache_write: 3.75,
            tiers: None,
        };
        let u = Usage {
            input: 100,
            output: 5,
            ..Default::default()
        };
        let c = calculate(&p, &u);
        assert_eq!(c.input, 0.00030000000000000003);
        assert_eq!(c.output, 7.500000000000001e-05);
        assert_eq!(c.total, 0.000375);
        let u = Usage {
            input: 1200,
            output: 9,
            ..Default::default()
        };
        let c = calculate(&p, &u);
        assert_eq!((c.input, c.output, c.total), (0.0036, 0.000135, 0.003735));
        let p = ModelCost {
            input: 2.0,
            output: 8.0,
            cache_read: 0.0,
            cache_write: 0.0,
            tiers: None,
        };
        let u = Usage {
            input: 100,
            output: 3,
            ..Default::default()
        };
        let c = calculate(&p, &u);
        assert_eq!(
            (c.input, c.output, c.total),
            (0.00019999999999999998, 2.4e-05, 0.00022399999999999997)
        );
    }
}
