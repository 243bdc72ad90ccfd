//! Boundaries: create (admin), list (the caller's), get, delete (admin; refused while the
//! boundary holds resources or policies).

use palisade_api_types::view::{Boundary, BoundaryList, NewBoundary};
use palisade_store::{BoundaryRecord, StoreError};

use crate::caller::Caller;
use crate::error::{boundary_not_found, AppError, AppResult};
use crate::paging::PageRequest;
use crate::App;

fn view(record: BoundaryRecord) -> Boundary {
    Boundary {
        name: record.name,
        display_name: record.display_name,
        created_at: record.created_at,
    }
}

impl App {
    /// Creates a boundary (admin).
    pub async fn create_boundary(&self, caller: &Caller, new: NewBoundary) -> AppResult<Boundary> {
        caller.require_admin()?;
        self.admit_write(caller, None)?;
        palisade_policy::Name::parse(&new.name).map_err(|e| AppError::invalid("/name", e))?;
        if let Some(display) = &new.display_name {
            if display.chars().count() > 256 {
                return Err(AppError::invalid(
                    "/display_name",
                    "must be at most 256 characters",
                ));
            }
            if let Some(control) = display.chars().find(|c| c.is_control()) {
                return Err(AppError::invalid(
                    "/display_name",
                    format!(
                        "must not contain control characters (found U+{:04X})",
                        u32::from(control)
                    ),
                ));
            }
        }
        let record = self
            .store
            .create_boundary(&new.name, new.display_name.as_deref())
            .await
            .map_err(|e| match e {
                StoreError::Conflict(_) => {
                    AppError::Conflict(format!("boundary '{}' already exists", new.name))
                }
                other => AppError::from_store(other, "boundary"),
            })?;
        Ok(view(record))
    }

    /// Every boundary the caller sees, in name order.
    pub async fn boundaries(&self, caller: &Caller) -> AppResult<Vec<Boundary>> {
        let records = self
            .store
            .list_boundaries()
            .await
            .map_err(|e| AppError::from_store(e, "boundary"))?;
        Ok(records
            .into_iter()
            .filter(|b| caller.sees(&b.name))
            .map(view)
            .collect())
    }

    /// A page of the boundaries the caller sees.
    pub async fn list_boundaries(
        &self,
        caller: &Caller,
        page: &PageRequest,
    ) -> AppResult<BoundaryList> {
        let page = page.page(
            &self.continue_tokens(),
            "boundaries",
            self.boundaries(caller).await?,
            |b| b.name.clone(),
        )?;
        Ok(BoundaryList {
            items: page.items,
            continue_token: page.continue_token,
        })
    }

    /// One boundary (404 unless the caller sees it).
    pub async fn get_boundary(&self, caller: &Caller, boundary: &str) -> AppResult<Boundary> {
        caller.require_visible(boundary)?;
        let record = self
            .store
            .get_boundary(boundary)
            .await
            .map_err(|e| match e {
                StoreError::NotFound => boundary_not_found(boundary),
                other => AppError::from_store(other, "boundary"),
            })?;
        Ok(view(record))
    }

    /// Deletes an empty boundary (admin).
    pub async fn delete_boundary(&self, caller: &Caller, boundary: &str) -> AppResult<()> {
        crate::path_name("boundary", boundary).map_err(|_| boundary_not_found(boundary))?;
        self.visible_boundary(caller, boundary).await?;
        caller.require_admin()?;
        self.admit_write(caller, Some(boundary))?;
        self.store
            .delete_boundary(boundary)
            .await
            .map_err(|e| match e {
                StoreError::Conflict(reason) => {
                    AppError::Conflict(format!("boundary '{boundary}' cannot be deleted: {reason}"))
                }
                other => AppError::from_store(other, "boundary"),
            })
    }
}
