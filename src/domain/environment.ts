/** The deployments intake knows (INTAKE_ENV); keys carry theirs (`whk_dev_`, `whk_stg_`, `whk_live_`). */
export const ENVIRONMENTS = ['development', 'staging', 'production'] as const;
export type Environment = (typeof ENVIRONMENTS)[number];
