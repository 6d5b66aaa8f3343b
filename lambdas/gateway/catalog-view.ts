/**
 * The wire form of catalog entries: SPEC's list item and single-model read.
 */
import type { CatalogModel } from '../shared/catalog-types';

/** One item of GET /v1/models. */
export function catalogEntry(model: CatalogModel): Record<string, unknown> {
  return {
    id: model.id,
    object: 'model',
    created: model.created,
    owned_by: model.provider,
    sluice: {
      model_id: model.id,
      display_name: model.displayName,
      author: model.author,
      context_window_tokens: model.contextWindowTokens,
      max_output_tokens: model.maxOutputTokens,
      input_rate_thousandths: model.inputRateThousandths,
      cached_input_rate_thousandths: model.cachedInputRateThousandths,
      output_rate_thousandths: model.outputRateThousandths,
      currency_code: model.currencyCode,
      endpoint_families: model.endpointFamilies,
      provider_display_names: [model.provider],
      capabilities: model.capabilities,
    },
  };
}

/** GET /v1/models/{id}: the entry together with its `parameters`. */
export function modelDetail(model: CatalogModel): Record<string, unknown> {
  return { ...catalogEntry(model), parameters: model.parameters };
}
