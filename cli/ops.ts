/**
 * The operator's use cases over DynamoDB, one import for the CLI, local-mode seeding and tests.
 * Each takes an `AdminContext` first; refusals are `AdminError` subclasses with a stable `code`.
 */
export type { AdminContext } from './context';
export * from './errors';
export {
  createWorkspace,
  showWorkspace,
  setPaused,
  setWorkspaceMonthlyLimit,
  setSpendRateCap,
  setPermittedModels,
  setDefaultProfile,
  SPEND_CAP_DEFAULT_MINOR,
  SPEND_CAP_MIN_MINOR,
  SPEND_CAP_CEILING_MINOR,
} from './ops/workspaces';
export type { WorkspaceView, MoneyView } from './ops/workspaces';
export { addCredit } from './ops/credit';
export { addMember, setMemberMonthlyLimit, removeMember } from './ops/members';
export { createKey, listKeys, resolveKey, setKeyExpiry, setKeyCreditLimit, MAX_KEY_SLOTS, WINDOW_CADENCES } from './ops/keys';
export type { KeyRef, KeyView } from './ops/keys';
export { createProfile, reorderProfile, deleteProfile, listProfiles, PROFILE_MAX_MODELS } from './ops/profiles';
export { setByokKey, removeByokKey } from './ops/byok';
export { importCatalog, loadCatalogFiles, parseCatalogEntries, writeCatalog, readCatalog } from './ops/catalog';
export {
  catalogItemToModel,
  catalogItemToProvider,
  modelPk,
  providerPk,
  modelToItem,
  providerToItem,
  MODEL_PK_PREFIX,
  PROVIDER_PK_PREFIX,
} from './catalog-items';
export type { ModelItem, ProviderItem } from './catalog-items';
export { SecretsManagerStore, LocalFileSecretStore, byokSecretName } from './secret-store';
export type { SecretStore } from './secret-store';
