/**
 * The directory: the operator's use cases over DynamoDB (workspaces, members, keys, profiles,
 * BYOK, the catalog, usage reads, the audit trail), with every write and condition expression of
 * the management API, the balance's included (`balance-port.ts`). Each takes an
 * `AdminContext` first; refusals are `AdminError` subclasses with a stable `code`, which the
 * management API maps to a status in `lambdas/admin/refusals.ts`.
 */
export type { AdminContext } from './directory-context';
export * from './directory-errors';
export {
  createWorkspace,
  showWorkspace,
  setPaused,
  setWorkspaceMonthlyLimit,
  setSpendRateCap,
  setPermittedModels,
  setDefaultProfile,
  listWorkspaces,
  setLowCreditThreshold,
  changePermittedModels,
  SPEND_CAP_DEFAULT_MINOR,
  SPEND_CAP_MIN_MINOR,
  SPEND_CAP_CEILING_MINOR,
} from './directory-workspaces';
export type { WorkspaceView, MoneyView, WorkspaceSummary } from './directory-workspaces';
export { addMember, setMemberMonthlyLimit, removeMember, listMembers } from './directory-members';
export { createKey, listKeys, resolveKey, setKeyExpiry, setKeyCreditLimit, revokeKey, rotateKey, showKey, MAX_KEY_SLOTS, WINDOW_CADENCES } from './directory-keys';
export type { KeyRef, KeyView, KeyDetail } from './directory-keys';
export { createProfile, reorderProfile, deleteProfile, listProfiles, PROFILE_MAX_MODELS } from './directory-profiles';
export { setByokKey, removeByokKey, listByokProviders } from './directory-byok';
export { writeCatalog, readCatalog, requireCatalogued } from './directory-catalog';
export { findUsageRow, lastUseOfKey } from './directory-usage';
export { recordAudit, listAudit, AUDIT_GLOBAL } from './audit';
export type { AuditEntry, AuditSummary } from './audit';
export {
  catalogItemToModel,
  catalogItemToProvider,
  modelPk,
  providerPk,
  modelToItem,
  providerToItem,
  MODEL_PK_PREFIX,
  PROVIDER_PK_PREFIX,
} from '../catalog/items';
export type { ModelItem, ProviderItem } from '../catalog/items';
export { parseCatalogEntries } from '../catalog/import';
export { SecretsManagerStore, LocalFileSecretStore, byokSecretName } from './directory-secrets';
export type { SecretStore } from './directory-secrets';
