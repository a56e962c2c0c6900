export { type Access } from './access';
export { createDashboard, type DashboardHandler, type DashboardOptions, type DashboardRequest } from './create-dashboard';
export type { OverviewData, Problem } from './overview-page';
export type { JobsData, JobView } from './jobs-page';
export type { StepsData, StepView } from './steps-page';
export type { ImportsData, ImportView } from './imports-page';
export type { FileCounts, FilesData, FileView } from './files-page';
export type { ResetData } from './reset-page';
